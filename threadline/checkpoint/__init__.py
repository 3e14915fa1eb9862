"""Savers: where a thread's checkpoints and pending writes are kept."""

from threadline.checkpoint.base import (
    BaseSaver,
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    Retention,
    StorageHints,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
    thread_status,
)
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.memory import InMemorySaver, MemorySaver
from threadline.checkpoint.sqlite import SqliteSaver
from threadline.checkpoint.urls import from_url

__all__ = [
    "BaseSaver",
    "Checkpoint",
    "CheckpointRecord",
    "InMemorySaver",
    "MemorySaver",
    "PlannedTask",
    "Retention",
    "SqliteSaver",
    "StorageHints",
    "TaskWrite",
    "ThreadInfo",
    "ThreadStatus",
    "from_url",
    "new_checkpoint_id",
    "thread_status",
]
