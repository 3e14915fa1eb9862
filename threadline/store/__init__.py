"""Long-term memory shared across threads (LangGraph's ``BaseStore`` shapes).

See ``threadline.store.base`` for the contract and ``InMemoryStore`` for the reference backend.
``SqliteStore`` needs only the standard library; ``PostgresStore`` (extra ``postgres``) and
``RedisStore`` (extra ``redis``) are imported on first use, so their drivers stay optional.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadline._lazy import import_with_extra
from threadline.store.base import BaseStore
from threadline.store.item import Item, SearchItem
from threadline.store.memory import InMemoryStore
from threadline.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from threadline.store.postgres import PostgresStore
    from threadline.store.redis import RedisStore

__all__ = [
    "BaseStore",
    "InMemoryStore",
    "Item",
    "PostgresStore",
    "RedisStore",
    "SearchItem",
    "SqliteStore",
]

_LAZY = {
    "PostgresStore": "threadline.store.postgres",
    "RedisStore": "threadline.store.redis",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_with_extra(module), name)
