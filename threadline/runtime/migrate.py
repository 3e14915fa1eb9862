"""State migrations: checkpoints written by an older shape of the state, read by the new one.

A graph declares its state's version (``StateGraph(State, state_version=2)``) and registers
upcasters, each turning values of one version into the next
(``@builder.upcaster(from_version=1)``). Every checkpoint a versioned graph saves carries its
version in metadata (``state_version``); one without it is version 1. When a run or
``get_state`` loads an older checkpoint, its values, and the updates its finished tasks saved,
go through the upcasters in turn. Nothing is rewritten in place: the checkpoint keeps its id
(so task and interrupt ids, and answers to them, still match) and the next checkpoint the run
saves stores every value again, in the new shape.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from threadline.checkpoint.base import CheckpointRecord, TaskWrite
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.constants import START
from threadline.errors import GraphValidationError, IncompatibleThreadError
from threadline.graph.spec import GraphSpec

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
VERSION_KEY = "state_version"  # in checkpoint metadata


def checked_version(value: Any, name: str) -> Any:
    """A state version is an int from 1 up (``None``: the graph declares none)."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise GraphValidationError(f"{name} must be an int >= 1, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Migrations:
    """A graph's state version and the upcasters from each older version to the next."""

    version: int
    upcasters: Mapping[int, Upcaster]

    @classmethod
    def of(cls, version: int | None, upcasters: Mapping[int, Upcaster]) -> Migrations | None:
        """Checked at compile time; ``None`` when the graph declares no version."""
        if version is None:
            if upcasters:
                raise GraphValidationError(
                    "upcasters need a state version: StateGraph(State, state_version=N)"
                )
            return None
        wrong = sorted(v for v in upcasters if not 1 <= v < version)
        if wrong:
            raise GraphValidationError(
                f"upcaster from_version={wrong[0]} does not lead to this graph's "
                f"state_version={version}: upcasters go from 1 up to {version - 1}"
            )
        return cls(version, dict(upcasters))

    def stored_version(self, record: CheckpointRecord) -> int:
        version = record.metadata.get(VERSION_KEY, 1)
        return version if isinstance(version, int) and not isinstance(version, bool) else 1

    def upgrade(self, record: CheckpointRecord) -> CheckpointRecord:
        """``record`` in this version's shape; the same record when it is in it already."""
        stored = self.stored_version(record)
        if stored == self.version:
            return record
        if stored > self.version:
            raise IncompatibleThreadError(
                f"{_where(record)} was written with state_version={stored}, but this graph "
                f"reads state_version={self.version}: run the newer graph to continue it"
            )
        cp = record.checkpoint
        values = self._upcast(record, cp.values, stored)
        fresh = new_checkpoint_id()  # stored anew with the next checkpoint, never over the old
        writes = tuple(self._upcast_write(record, w, stored) for w in record.pending_writes)
        upgraded = dataclasses.replace(cp, values=values, versions=dict.fromkeys(values, fresh))
        return dataclasses.replace(record, checkpoint=upgraded, pending_writes=writes)

    def _upcast(
        self, record: CheckpointRecord, values: Mapping[str, Any], stored: int
    ) -> dict[str, Any]:
        """``values`` through each upcaster from ``stored`` on (a deep copy: an upcaster that
        changes a value in place must not change the record it was read from)."""
        current = copy.deepcopy(dict(values))
        for version in range(stored, self.version):
            upcaster = self.upcasters.get(version)
            if upcaster is None:
                raise IncompatibleThreadError(
                    f"{_where(record)} was written with state_version={stored}, and this graph "
                    f"(state_version={self.version}) has no upcaster from version {version}: "
                    f"register one with @builder.upcaster(from_version={version})"
                )
            try:
                current = upcaster(current)
            except Exception as exc:
                raise IncompatibleThreadError(
                    f"the upcaster from state_version={version} failed on {_where(record)}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            if not isinstance(current, dict):
                raise IncompatibleThreadError(
                    f"the upcaster from state_version={version} returned "
                    f"{type(current).__name__}; it must return a dict of state values"
                )
        return current

    def _upcast_write(self, record: CheckpointRecord, write: TaskWrite, stored: int) -> TaskWrite:
        """A finished task's saved result: its updates are state values of the old shape too
        (a key written twice in one result is upcast one write at a time)."""
        result = write.value
        if write.kind != "result" or not isinstance(getattr(result, "updates", None), tuple):
            return write
        pairs = result.updates
        if len({key for key, _ in pairs}) == len(pairs):
            groups = [dict(pairs)]
        else:
            groups = [{key: value} for key, value in pairs]
        updates = tuple(
            item for group in groups for item in self._upcast(record, group, stored).items()
        )
        return dataclasses.replace(write, value=dataclasses.replace(result, updates=updates))


def check_planned(spec: GraphSpec, record: CheckpointRecord) -> None:
    """Refuse to continue a checkpoint that plans nodes this graph does not have."""
    gone = planned_but_gone(spec, record)
    if gone:
        raise IncompatibleThreadError(
            f"checkpoint {record.checkpoint.id} of thread {record.thread_id!r} plans "
            f"{', '.join(map(repr, gone))}, which this graph does not have (nodes: "
            f"{', '.join(spec.nodes)}); nothing was run. Add the node back, or move the thread "
            "on with update_state(config, values, as_node=...)"
        )


def planned_but_gone(spec: GraphSpec, record: CheckpointRecord) -> list[str]:
    """The nodes ``record`` plans that ``spec`` does not have."""
    names = dict.fromkeys(p.name for p in record.checkpoint.next)
    return [name for name in names if name != START and name not in spec.nodes]


def _where(record: CheckpointRecord) -> str:
    return f"checkpoint {record.checkpoint.id} of thread {record.thread_id!r}"
