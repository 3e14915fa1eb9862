"""A list held decoded between loads, handed out as fresh copies (``HeldItems``).

Only items built of dicts, lists and values that cannot change (strings, numbers, dates...) are
held: a load gets new dicts and lists around the same immutable values, which costs far less
than decoding them again, and nothing a node or a caller does to what it got reaches the held
objects. Each item's way of being copied is worked out once, when it is added.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

#: Types whose values cannot change, so that loads may share them (exact types: subclasses may).
_IMMUTABLE = frozenset(
    {str, bytes, int, float, bool, type(None), datetime, date, time, timedelta, Decimal, UUID}
)

Copier = Callable[[Any], Any] | None  # how a load gets its own copy of an item; None: shared


class _NotPlain(Exception):
    """An item that is not built of dicts, lists and immutable values only."""


def _frozen(value: Any) -> bool:
    """Whether ``value`` can never change: an immutable value, or a tuple of them."""
    kind = type(value)
    if kind is tuple or kind is frozenset:
        return all(map(_frozen, value))
    return kind in _IMMUTABLE


def _plain(value: Any) -> bool:
    """Whether ``value`` is built of dicts, lists and values that cannot change."""
    kind = type(value)
    if kind is dict:
        return all(_frozen(k) and _plain(v) for k, v in value.items())
    if kind is list:
        return all(map(_plain, value))
    return _frozen(value)


def _fresh(value: Any) -> Any:
    """A copy of every dict and list in a plain ``value``, sharing what cannot change."""
    kind = type(value)
    if kind is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if kind is list:
        return [_fresh(v) for v in value]
    return value


def _copier(item: Any) -> Copier:
    """How a load gets its own ``item``: shared (None) if it cannot change, a one-level copy
    for a dict or list of immutable values (a chat message), else a copy of every container;
    ``_NotPlain`` if it holds anything else."""
    if _frozen(item):
        return None
    kind = type(item)
    if kind is dict and all(map(_frozen, item)) and all(map(_frozen, item.values())):
        return dict.copy
    if kind is list and all(map(_frozen, item)):
        return list.copy
    if _plain(item):
        return _fresh
    raise _NotPlain


@dataclass(slots=True)
class HeldItems:
    """A held list decoded once; its objects never leave here, loads get copies."""

    values: list[Any] = field(default_factory=list)
    copiers: list[Copier] = field(default_factory=list)
    kinds: set[Copier] = field(default_factory=set)  # the distinct copiers among ``copiers``

    def extend(self, items: Any) -> bool:
        """Add decoded ``items``; False (and nothing added) if they are not a list of items
        that can be handed out as copies."""
        if type(items) is not list:
            return False
        try:
            copiers = [_copier(item) for item in items]
        except (_NotPlain, RecursionError):
            return False
        self.values += items
        self.copiers += copiers
        self.kinds.update(copiers)
        return True

    def copy(self) -> HeldItems:
        """Another holder of the same items, to grow apart (their objects are never changed)."""
        return HeldItems(list(self.values), list(self.copiers), set(self.kinds))

    def handout(self) -> Callable[[], list[Any]]:
        """What makes a load's own copy of the items held now (later ones are left out)."""
        count = len(self.values)
        if len(self.kinds) == 1:  # all alike (all messages flat dicts): one C-level map
            (copier,) = self.kinds
            return functools.partial(_copied_alike, self.values, copier, count)
        return functools.partial(_copied, self.values, self.copiers, count)


def _copied(values: list[Any], copiers: list[Copier], count: int) -> list[Any]:
    return [v if c is None else c(v) for v, c in zip(values[:count], copiers[:count], strict=True)]


def _copied_alike(values: list[Any], copier: Copier, count: int) -> list[Any]:
    return values[:count] if copier is None else list(map(copier, values[:count]))
