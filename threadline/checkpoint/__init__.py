"""Savers: where a thread's checkpoints and pending writes are kept.

The PostgreSQL and Redis savers are imported on first use, so this package never needs psycopg
or redis-py unless those savers are used. Each saver also lives at the module path LangGraph
gives it (``threadline.checkpoint.memory``, ``.sqlite``, ``.sqlite.aio``, ``.postgres``,
``.postgres.aio``, ``.redis``, ``.redis.aio``), so a LangGraph program changes only the
``langgraph`` part of its imports.
"""

from typing import Any

from threadline._lazy import import_with_extra
from threadline.checkpoint.base import (
    BaseSaver,
    Checkpoint,
    CheckpointRecord,
    CheckpointTuple,
    PlannedTask,
    Retention,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
    thread_status,
)
from threadline.checkpoint.files import FileSaver
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.memory import InMemorySaver, MemorySaver
from threadline.checkpoint.sqlite import SqliteSaver
from threadline.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadline.checkpoint.urls import from_url

__all__ = [
    "AsyncPostgresSaver",
    "AsyncRedisSaver",
    "AsyncSqliteSaver",
    "BaseSaver",
    "Checkpoint",
    "CheckpointRecord",
    "CheckpointTuple",
    "FileSaver",
    "InMemorySaver",
    "MemorySaver",
    "PlannedTask",
    "PostgresSaver",
    "RedisSaver",
    "Retention",
    "SqliteSaver",
    "TaskWrite",
    "ThreadInfo",
    "ThreadStatus",
    "from_url",
    "new_checkpoint_id",
    "thread_status",
]

_LAZY = {
    "PostgresSaver": "threadline.checkpoint.postgres",
    "AsyncPostgresSaver": "threadline.checkpoint.postgres.aio",
    "RedisSaver": "threadline.checkpoint.redis",
    "AsyncRedisSaver": "threadline.checkpoint.redis.aio",
}


def __getattr__(name: str) -> Any:
    """Import a saver whose driver is an optional dependency only when it is asked for."""
    if name in _LAZY:
        return getattr(import_with_extra(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
