"""What the engine did to each value since the last saved checkpoint, so a saver stores only that.

Applying a step's writes tells the engine, per key, what happened: a new value (``Set``) or the
old list with items added after it (``Append``, from a reducer that kept the old items where
they were). A saver given these ``Changes`` stores a ``Set`` value whole and an ``Append`` as a
delta on the stored base; every key not named is already stored under its version. Without
them (a record from elsewhere) it stores every value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from threadline.checkpoint.base import CheckpointRecord


@dataclass(frozen=True, slots=True)
class Set:
    """The key has a new value, stored whole."""


@dataclass(frozen=True, slots=True)
class Append:
    """The key's value is its value at ``base_version`` plus new items from ``base_length`` on."""

    base_version: str
    base_length: int


SET = Set()
Change = Set | Append
Changes = Mapping[str, Change]
"""The changed keys of a checkpoint, each with what happened to it; other keys are unchanged."""


def then(earlier: Change | None, later: Change) -> Change:
    """One change doing what ``earlier`` and then ``later`` did (``None``: nothing before).

    Appending to a list that was appended to is one append on the older base; anything after
    or before a ``Set`` is a new value.
    """
    if earlier is None:
        return later
    return earlier if isinstance(earlier, Append) and isinstance(later, Append) else SET


@dataclass(slots=True)
class ChangedRecord(CheckpointRecord):
    """A record the engine saves, with what changed since the checkpoint it saved before."""

    changes: Changes = field(default_factory=dict)


def changes_of(record: CheckpointRecord) -> Changes | None:
    """What changed in ``record``, or ``None`` when nobody said (every value is stored)."""
    return record.changes if isinstance(record, ChangedRecord) else None
