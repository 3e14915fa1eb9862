"""What ``@entrypoint`` makes: a one-node graph whose state is the function's last return value.

The function is the graph's only node. A new input makes an ``input`` checkpoint that plans the
node with the input as its argument; the step that runs it makes the next checkpoint, holding
what it returned (``__end__``, what ``get_state().values`` and ``invoke`` show) and what it
saved for the next run (``__previous__``, which ``entrypoint.final`` can set apart). So a run
leaves two checkpoints, as in LangGraph, and interrupts, resume, durability, streaming, history
and crash recovery are the engine's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from threadline.checkpoint.base import CheckpointRecord, PlannedTask
from threadline.constants import END, INTERRUPT_KEY
from threadline.func.call import updates_sink
from threadline.func.final import PREVIOUS, state_update
from threadline.graph.compiled import CompiledStateGraph
from threadline.graph.schema import Channel, StateSchema
from threadline.graph.spec import GraphSpec, NodeSpec
from threadline.runtime.chunks import Emit
from threadline.runtime.drivers import Done
from threadline.runtime.effects import Effect
from threadline.runtime.loop import RunLoop
from threadline.types import Interrupt


class _EntrypointState(dict):  # type: ignore[type-arg]
    """The state of an entrypoint graph (named in error messages)."""


SCHEMA = StateSchema(
    cls=_EntrypointState,
    kind="typeddict",
    channels={END: Channel(END, None, None), PREVIOUS: Channel(PREVIOUS, None, None)},
)


@dataclass(frozen=True)
class EntrypointSpec(GraphSpec):
    """An entrypoint's graph: its state shows as the function's last return value."""

    entry: str = ""

    def output_values(self, values: Mapping[str, Any]) -> Any:
        return values.get(END)

    def state_values(self, values: Mapping[str, Any]) -> Any:
        return values.get(END)


def entrypoint_spec(node: NodeSpec, context_schema: type | None) -> EntrypointSpec:
    return EntrypointSpec(
        schema=SCHEMA,
        nodes={node.name: node},
        edges={},
        branches={},
        joins=(),
        context_schema=context_schema,
        entry=node.name,
    )


class EntryLoop(RunLoop):
    """The run loop of an entrypoint: new input plans the function itself, with the input."""

    spec: EntrypointSpec

    def _begin(self, input: Any, record: CheckpointRecord | None) -> Generator[Effect, Any, None]:
        cp_id = self._new_id()
        if record is None:
            values: dict[str, Any] = {}
            versions: dict[str, str] = {}
            step = -1
        else:
            base = record.checkpoint
            values, versions, step = dict(base.values), dict(base.versions), base.step + 1
            self.progress.saved = base
            self.progress.fork_next = self.s.checkpoint_id is not None
        planned = (PlannedTask(self.spec.entry, input, send=True),)
        cp = self.progress.checkpoint(values, versions, planned, {}, (), step, cp_id)
        yield from self.progress.commit(cp, "input", [])

    def _output(self, interrupts: tuple[Interrupt, ...] = (), done: Any = ()) -> Any:
        """The return value; stopped at an interrupt, a dict with ``__interrupt__`` (merged
        into the last return value when that is a dict, as LangGraph does). ``done`` is
        unused: an entrypoint's step has one task, so no sibling finished beside it."""
        value = self.progress.cp().values.get(END)
        if not interrupts:
            return value
        out = dict(value) if isinstance(value, dict) else {}
        out[INTERRUPT_KEY] = list(interrupts)
        return out


class FunctionalGraph(CompiledStateGraph):
    """The runnable ``@entrypoint`` returns: ``invoke``, ``stream``, ``get_state``... as a
    compiled graph has them."""

    spec: EntrypointSpec

    def _loop(
        self, config: Any, modes: frozenset[str], options: dict[str, Any], invoked: bool = False
    ) -> RunLoop:
        loop = super()._loop(config, modes, options, invoked)
        return EntryLoop(loop.spec, loop.saver, loop.store, loop.s)

    def _drive(
        self,
        input: Any,
        config: Any,
        modes: frozenset[str],
        options: dict[str, Any],
        invoked: bool = False,
    ) -> Generator[Emit | Done]:
        sink, chunks = self._sink(modes)
        # closing this stream closes the run at once, as a graph's does
        with contextlib.closing(super()._drive(input, config, modes, options, invoked)) as items:
            while True:
                token = updates_sink.set(sink)
                try:
                    item = next(items, None)
                finally:
                    updates_sink.reset(token)
                yield from chunks()
                if item is None:
                    return
                yield self._shown(item)

    async def _adrive(
        self,
        input: Any,
        config: Any,
        modes: frozenset[str],
        options: dict[str, Any],
        invoked: bool = False,
    ) -> AsyncGenerator[Emit | Done]:
        sink, chunks = self._sink(modes)
        run = super()._adrive(input, config, modes, options, invoked)
        async with contextlib.aclosing(run) as items:
            while True:
                token = updates_sink.set(sink)
                try:
                    item = await anext(items, None)
                finally:
                    updates_sink.reset(token)
                for chunk in chunks():
                    yield chunk
                if item is None:
                    return
                yield self._shown(item)

    def _sink(self, modes: frozenset[str]) -> tuple[Any, Any]:
        """Where task results go while "updates" are streamed, and how to take them out."""
        if "updates" not in modes:
            return None, tuple
        found: list[dict[str, Any]] = []

        def chunks() -> list[Emit]:
            taken = [Emit("updates", payload) for payload in found]
            del found[: len(taken)]
            return taken

        return found.append, chunks

    def _shown(self, item: Any) -> Any:
        """The function's update chunk shows what it returned, not the state keys."""
        if isinstance(item, Emit) and item.mode == "updates":
            update = item.payload.get(self.spec.entry) if isinstance(item.payload, dict) else None
            if isinstance(update, dict) and END in update:
                return Emit(item.mode, {self.spec.entry: update[END]}, item.ns)
        return item

    def update_state(
        self, config: Mapping[str, Any], values: Any, as_node: str | None = None
    ) -> dict[str, Any]:
        """As if the function had returned ``values`` (an ``entrypoint.final`` too)."""
        return super().update_state(config, state_update(values), as_node or self.spec.entry)

    async def aupdate_state(
        self, config: Mapping[str, Any], values: Any, as_node: str | None = None
    ) -> dict[str, Any]:
        return await super().aupdate_state(config, state_update(values), as_node or self.spec.entry)
