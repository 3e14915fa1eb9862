"""Savers: where a thread's checkpoints and pending writes are kept.

``PostgresSaver`` and ``RedisSaver`` are imported on first use, so this package never needs
psycopg or redis-py unless those savers are used.
"""

import importlib
from typing import Any

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
from threadline.checkpoint.files import FileSaver
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.memory import InMemorySaver, MemorySaver
from threadline.checkpoint.sqlite import SqliteSaver
from threadline.checkpoint.urls import from_url

__all__ = [
    "BaseSaver",
    "Checkpoint",
    "CheckpointRecord",
    "FileSaver",
    "InMemorySaver",
    "MemorySaver",
    "PlannedTask",
    "PostgresSaver",
    "RedisSaver",
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

_LAZY = {
    "PostgresSaver": "threadline.checkpoint.postgres",
    "RedisSaver": "threadline.checkpoint.redis",
}


def __getattr__(name: str) -> Any:
    """Import a saver whose driver is an optional dependency only when it is asked for."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
