"""The records a store returns: ``Item`` from ``get`` and ``SearchItem`` from ``search``.

Both print and compare as LangGraph's do, so a program that prints what it read shows the same
shape: ``Item(namespace=[...], key=..., value=..., created_at='...', updated_at='...')``, with
``score=...`` last for a search result. Equality ignores ``score`` and hashing uses the address,
as there. ``expires_at`` (threadline's addition) appears in ``dict()`` and the repr only when the
item has a TTL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

Namespace = tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Item:
    """A stored value with its address and timestamps (tz-aware UTC).

    ``expires_at`` is ``None`` for items put without a ``ttl``.
    """

    value: dict[str, Any]
    key: str
    namespace: Namespace
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None

    def dict(self) -> dict[str, Any]:
        """A JSON-ready dict: LangGraph's ``Item.dict()`` keys, plus ``expires_at`` if set."""
        out: dict[str, Any] = {
            "namespace": list(self.namespace),
            "key": self.key,
            "value": self.value,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }
        if self.expires_at is not None:
            out["expires_at"] = self.expires_at.isoformat()
        return out

    def __repr__(self) -> str:
        # LangGraph names every record "Item" here, search results included.
        return f"Item({', '.join(f'{k}={v!r}' for k, v in self.dict().items())})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Item):
            return NotImplemented
        return (
            self.value == other.value
            and self.key == other.key
            and self.namespace == other.namespace
            and self.created_at == other.created_at
            and self.updated_at == other.updated_at
            and self.expires_at == other.expires_at
        )

    def __hash__(self) -> int:
        return hash((self.namespace, self.key))


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class SearchItem(Item):
    """A ``search`` result: an ``Item`` plus ``score``, the query's cosine similarity to it.

    ``score`` is ``None`` when the search had no ``query`` (or the item has no vectors).
    """

    score: float | None = None

    def dict(self) -> dict[str, Any]:
        out = Item.dict(self)
        out["score"] = self.score
        return out


def as_search_item(item: Item, score: float | None) -> SearchItem:
    """``item`` as a search result with ``score``."""
    return SearchItem(
        value=item.value,
        key=item.key,
        namespace=item.namespace,
        created_at=item.created_at,
        updated_at=item.updated_at,
        expires_at=item.expires_at,
        score=score,
    )
