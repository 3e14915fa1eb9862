"""Reading and editing a compiled graph's threads: ``get_state``, its history, ``update_state``.

A mixin of ``CompiledStateGraph``: it uses the graph's ``spec``, ``checkpointer`` and the
saver and migration helpers the class defines (``_own_saver``, ``_metadata``, ``_upgraded``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from threadline.checkpoint.base import BaseSaver, CheckpointRecord
from threadline.checkpoint.changes import SET
from threadline.errors import (
    CheckpointerRequiredError,
    CheckpointNotFoundError,
    InvalidUpdateError,
)
from threadline.graph.configs import before_id, config_of, configurable_of, thread_id_of
from threadline.graph.subgraph import saved_ns
from threadline.runtime.planning import task_ns
from threadline.runtime.snapshot import empty_snapshot, snapshot_of, updated_record
from threadline.types import StateSnapshot, StateUpdate

if TYPE_CHECKING:
    from threadline.graph.spec import GraphSpec


class StateAccess:
    """``get_state``, ``get_state_history`` and ``update_state``, sync and async."""

    spec: GraphSpec

    if TYPE_CHECKING:  # defined by CompiledStateGraph and RunnableMethods

        def _own_saver(self) -> BaseSaver | None: ...

        def _bound(self, config: Mapping[str, Any] | None) -> Mapping[str, Any] | None: ...

        def _upgraded(self, record: CheckpointRecord) -> CheckpointRecord: ...

        def _metadata(
            self, config: Mapping[str, Any], configurable: Mapping[str, Any]
        ) -> dict[str, Any]: ...

    def get_state(self, config: Mapping[str, Any], *, subgraphs: bool = False) -> StateSnapshot:
        """The thread's latest checkpoint, or the one named by ``checkpoint_id``."""
        saver, thread_id, ns, checkpoint_id = self._address(config)
        record = saver.get_tuple(thread_id, ns, checkpoint_id)
        snap = self._snapshot(config, record, checkpoint_id)
        if not subgraphs:
            return snap
        return self._with_subgraphs(snap, lambda sub_ns: saver.get_tuple(thread_id, sub_ns))

    async def aget_state(
        self, config: Mapping[str, Any], *, subgraphs: bool = False
    ) -> StateSnapshot:
        saver, thread_id, ns, checkpoint_id = self._address(config)
        record = await saver.aget_tuple(thread_id, ns, checkpoint_id)
        snap = self._snapshot(config, record, checkpoint_id)
        if not subgraphs:
            return snap
        # Subgraph checkpoints are few and small: read them through the sync API.
        return await asyncio.to_thread(
            self._with_subgraphs, snap, lambda sub_ns: saver.get_tuple(thread_id, sub_ns)
        )

    def get_state_history(
        self,
        config: Mapping[str, Any],
        *,
        filter: Mapping[str, Any] | None = None,
        before: Mapping[str, Any] | str | None = None,
        limit: int | None = None,
    ) -> Iterator[StateSnapshot]:
        """Every checkpoint of the thread, newest first (all branches)."""
        saver, thread_id, ns, _ = self._address(config)
        for record in saver.list(
            thread_id, ns, filter=filter, before=before_id(before), limit=limit
        ):
            yield snapshot_of(self.spec, self._upgraded(record))

    async def aget_state_history(
        self,
        config: Mapping[str, Any],
        *,
        filter: Mapping[str, Any] | None = None,
        before: Mapping[str, Any] | str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        saver, thread_id, ns, _ = self._address(config)
        async for record in saver.alist(
            thread_id, ns, filter=filter, before=before_id(before), limit=limit
        ):
            yield snapshot_of(self.spec, self._upgraded(record))

    def update_state(
        self, config: Mapping[str, Any], values: Any, as_node: str | None = None
    ) -> dict[str, Any]:
        """Apply ``values`` through the reducers as if ``as_node`` wrote them; fork if older."""
        return self.bulk_update_state(config, [[StateUpdate(values, as_node)]])

    async def aupdate_state(
        self, config: Mapping[str, Any], values: Any, as_node: str | None = None
    ) -> dict[str, Any]:
        return await self.abulk_update_state(config, [[StateUpdate(values, as_node)]])

    def bulk_update_state(
        self, config: Mapping[str, Any], supersteps: Sequence[Sequence[StateUpdate]]
    ) -> dict[str, Any]:
        """Several ``update_state`` steps at once: one ``update`` checkpoint per superstep, each
        applying its updates together as if their nodes had run side by side in one step."""
        saver, thread_id, ns, checkpoint_id = self._address(config)
        steps = _supersteps(supersteps)
        record = self._existing(
            saver.get_tuple(thread_id, ns, checkpoint_id), config, checkpoint_id
        )
        fork = checkpoint_id is not None
        for updates in steps:
            record = self._update(record, thread_id, config, updates)
            saver.put(record, fork=fork)
            fork = False
        assert record is not None  # there was at least one step
        return config_of(record)

    async def abulk_update_state(
        self, config: Mapping[str, Any], supersteps: Sequence[Sequence[StateUpdate]]
    ) -> dict[str, Any]:
        saver, thread_id, ns, checkpoint_id = self._address(config)
        steps = _supersteps(supersteps)
        found = await saver.aget_tuple(thread_id, ns, checkpoint_id)
        record = self._existing(found, config, checkpoint_id)
        fork = checkpoint_id is not None
        for updates in steps:
            record = self._update(record, thread_id, config, updates)
            await saver.aput(record, fork=fork)
            fork = False
        assert record is not None  # there was at least one step
        return config_of(record)

    def _update(
        self,
        record: CheckpointRecord | None,
        thread_id: str,
        config: Mapping[str, Any],
        updates: Sequence[StateUpdate],
    ) -> CheckpointRecord:
        """The ``update`` checkpoint; values an upcaster changed are stored again in full."""
        metadata = self._metadata(dict(config), configurable_of(config))
        upgraded = self._upgraded(record) if record is not None else None
        pairs = [(u.as_node, u.values) for u in updates]
        new = updated_record(self.spec, upgraded, thread_id, pairs, metadata)
        if upgraded is record or record is None:
            return new
        return dataclasses.replace(new, changes=dict.fromkeys(new.checkpoint.values, SET))

    def _address(self, config: Mapping[str, Any]) -> tuple[BaseSaver, str, str, str | None]:
        saver = self._own_saver()
        if saver is None:
            raise CheckpointerRequiredError(
                "this graph has no checkpointer; compile(checkpointer=...) to keep threads"
            )
        configurable = configurable_of(self._bound(config))
        thread_id = thread_id_of(configurable, saver)
        assert thread_id is not None
        ns = configurable.get("checkpoint_ns") or ""
        return saver, thread_id, ns, configurable.get("checkpoint_id")

    def _snapshot(
        self, config: Mapping[str, Any], record: CheckpointRecord | None, checkpoint_id: str | None
    ) -> StateSnapshot:
        record = self._existing(record, config, checkpoint_id)
        if record is None:
            return empty_snapshot(dict(config))
        live = checkpoint_id is None  # the newest state, with what a stopped step's tasks wrote
        return snapshot_of(self.spec, self._upgraded(record), live)

    def _with_subgraphs(
        self, snap: StateSnapshot, load: Callable[[str], CheckpointRecord | None]
    ) -> StateSnapshot:
        """``snap`` with ``tasks[i].state`` set to the snapshot of the subgraph that task runs.

        Only tasks whose node is a compiled graph that has saved a checkpoint (it was
        interrupted, or failed, inside) get one; subgraphs inside those are filled in too.
        """
        ns = configurable_of(snap.config).get("checkpoint_ns", "")
        tasks = []
        for task in snap.tasks:
            node = self.spec.nodes.get(task.name)
            sub = node.subgraph if node is not None else None
            if sub is None:
                tasks.append(task)
                continue
            record = load(saved_ns(sub.checkpointer, task_ns(ns, task.name, task.id)))
            if record is not None:
                sub_snap = snapshot_of(sub.spec, record, live=True)
                task = task._replace(state=sub._with_subgraphs(sub_snap, load))
            tasks.append(task)
        return snap._replace(tasks=tuple(tasks))

    @staticmethod
    def _existing(
        record: CheckpointRecord | None, config: Mapping[str, Any], checkpoint_id: str | None
    ) -> CheckpointRecord | None:
        if record is None and checkpoint_id is not None:
            thread_id = configurable_of(config).get("thread_id")
            raise CheckpointNotFoundError(
                f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}"
            )
        return record


def _supersteps(supersteps: Sequence[Sequence[StateUpdate]]) -> list[list[StateUpdate]]:
    """``bulk_update_state``'s steps, each a non-empty list of ``StateUpdate``s."""
    steps = [[StateUpdate(*u) for u in step] for step in supersteps]
    if not steps:
        raise InvalidUpdateError("bulk_update_state needs at least one superstep")
    if any(not step for step in steps):
        raise InvalidUpdateError("each superstep of bulk_update_state needs at least one update")
    return steps
