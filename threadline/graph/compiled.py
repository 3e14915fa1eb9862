"""``CompiledStateGraph``: run a graph, read its threads, travel in their history."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping, Sequence
from typing import Any

from threadline.cache.base import BaseCache
from threadline.checkpoint.base import BaseSaver, CheckpointRecord
from threadline.errors import (
    AsyncNodeInSyncRunError,
    ConfigError,
    GraphValidationError,
    NotSupportedError,
)
from threadline.graph.configs import (
    checkpoint_metadata,
    recursion_limit,
    thread_id_of,
)
from threadline.graph.printing import aprinting, printed_modes, printing
from threadline.graph.runnable import RunnableMethods
from threadline.graph.schema import StateSchema
from threadline.graph.spec import CallStyle, GraphSpec, NodeSpec
from threadline.graph.state_access import StateAccess
from threadline.graph.stream_shape import aforwarded, forwarded, stream_shape, take_version
from threadline.graph.subgraph import nested_run
from threadline.graph.tracing import TraceReading
from threadline.maintenance import ReleasePolicy, areleased, release_policy, released
from threadline.runtime.chunks import Emit
from threadline.runtime.context import current_task
from threadline.runtime.drivers import Done, drive_async, drive_sync
from threadline.runtime.loop import RunLoop
from threadline.runtime.migrate import VERSION_KEY, Migrations
from threadline.runtime.runtime import coerce_context
from threadline.runtime.settings import RunSettings
from threadline.runtime.trace import RunTrace
from threadline.store.base import BaseStore
from threadline.types import RetryPolicy

# The options invoke/stream take besides input and config
_OPTIONS = frozenset(
    [
        "interrupt_before",
        "interrupt_after",
        "durability",
        "stream_mode",
        "subgraphs",
        "debug",
        "print_mode",
        "context",
        "control",
    ]
)
DURABILITY = ("sync", "async", "exit")


class CompiledStateGraph(RunnableMethods, TraceReading, StateAccess):
    """A validated graph, ready to run. Cheap to share between threads and tasks."""

    def __init__(
        self,
        spec: GraphSpec,
        *,
        checkpointer: BaseSaver | bool | None,
        store: BaseStore | None,
        interrupt_before: frozenset[str],
        interrupt_after: frozenset[str],
        name: str,
        cache: BaseCache[Any] | None = None,
        context_schema: Any = None,
        builder: Any = None,
        release_thread: ReleasePolicy | None = None,
        migrations: Migrations | None = None,
        trace: bool = True,
        debug: bool = False,
    ):
        if checkpointer is not None and not isinstance(checkpointer, BaseSaver | bool):
            raise GraphValidationError(
                "checkpointer must be a threadline saver, True, False or None, got "
                f"{type(checkpointer).__name__}"
            )
        if not isinstance(trace, bool):
            raise GraphValidationError(f"trace must be True or False, got {trace!r}")
        if cache is not None and not isinstance(cache, BaseCache):
            raise GraphValidationError(
                "cache must be a threadline cache (InMemoryCache, SqliteCache or a BaseCache), "
                f"got {type(cache).__name__}"
            )
        self.spec = spec
        self.checkpointer = checkpointer
        self.store = store
        self.cache = cache
        self.context_schema = context_schema
        self.interrupt_before = interrupt_before
        self.interrupt_after = interrupt_after
        self.name = name
        self.builder = builder  # the StateGraph compiled, as in LangGraph
        self.config: dict[str, Any] | None = None  # bound by with_config()
        #: What becomes of a thread when a run finishes it (threadline/maintenance.py)
        self.release_thread = release_policy(release_thread, checkpointer)
        #: The state version and its upcasters (threadline/runtime/migrate.py)
        self.migrations = migrations
        self.trace = trace  # runs save an execution trace (``get_trace``)
        self.debug = debug  # runs print their updates and values (threadline/graph/printing.py)

    # ------------------------------------------------------------------ running
    def invoke(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: str | Sequence[str] | None = "values",
        **options: Any,
    ) -> Any:
        """Run until the graph finishes or stops at an interrupt; return the state values.

        With another ``stream_mode`` (or a list of modes), return the list of chunks ``stream``
        yields, as LangGraph does. ``version="v2"`` returns a ``GraphOutput(value, interrupts)``
        (or the list of v2 stream parts).
        """
        if stream_mode != "values":
            modes, shape = stream_shape(stream_mode, options, self._as_output_type)
            items = self._drive(input, config, modes, options, invoked=True)
            return [shape(item) for item in items if isinstance(item, Emit)]
        v2 = take_version(options) == "v2"
        for item in self._drive(input, config, frozenset(), options, invoked=True):
            if isinstance(item, Done):
                return self._graph_output(item.output) if v2 else item.output
        raise AssertionError("run ended without output")  # pragma: no cover

    async def ainvoke(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: str | Sequence[str] | None = "values",
        **options: Any,
    ) -> Any:
        if stream_mode != "values":
            modes, shape = stream_shape(stream_mode, options, self._as_output_type)
            items = self._adrive(input, config, modes, options, invoked=True)
            return [shape(item) async for item in items if isinstance(item, Emit)]
        v2 = take_version(options) == "v2"
        async for item in self._adrive(input, config, frozenset(), options, invoked=True):
            if isinstance(item, Done):
                return self._graph_output(item.output) if v2 else item.output
        raise AssertionError("run ended without output")  # pragma: no cover

    def stream(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: str | Sequence[str] | None = "updates",
        **options: Any,
    ) -> Iterator[Any]:
        """Yield chunks as the run goes: ``(mode, data)`` pairs when several modes are asked.

        ``version="v2"`` yields ``{"type": mode, "ns": namespace, "data": chunk}`` dicts instead
        (``values`` ones also carry ``"interrupts"``), as LangGraph does.
        """
        modes, shape = stream_shape(stream_mode, options, self._as_output_type)
        with contextlib.closing(self._drive(input, config, modes, options)) as items:
            for item in items:
                if isinstance(item, Emit):
                    yield shape(item)

    async def astream(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: str | Sequence[str] | None = "updates",
        **options: Any,
    ) -> AsyncIterator[Any]:
        modes, shape = stream_shape(stream_mode, options, self._as_output_type)
        # Closing this stream closes the run at once, so a client gone leaves the thread settled
        async with contextlib.aclosing(self._adrive(input, config, modes, options)) as items:
            async for item in items:
                if isinstance(item, Emit):
                    yield shape(item)

    def _drive(
        self,
        input: Any,
        config: Mapping[str, Any] | None,
        modes: frozenset[str],
        options: dict[str, Any],
        invoked: bool = False,
    ) -> Generator[Emit | Done]:
        async_only = self.spec.has_async_only_node()
        if async_only is not None:
            raise AsyncNodeInSyncRunError(
                f"{async_only!r} is async; run this graph with ainvoke() or astream()"
            )
        printed = printed_modes(options, self.debug)
        loop = self._loop(config, modes | printed, options, invoked)
        items = drive_sync(loop, input)
        if loop.s.nested and loop.s.sink is not None:
            return forwarded(items, loop.s.sink, loop.s.ns)
        if printed and not loop.s.nested:
            items = printing(items, printed, modes)
        if self.release_thread is not None and not loop.s.nested:
            return released(items, loop, self.release_thread)
        return items

    def _adrive(
        self,
        input: Any,
        config: Mapping[str, Any] | None,
        modes: frozenset[str],
        options: dict[str, Any],
        invoked: bool = False,
    ) -> AsyncGenerator[Emit | Done]:
        printed = printed_modes(options, self.debug)
        loop = self._loop(config, modes | printed, options, invoked)
        items = drive_async(loop, input)
        if loop.s.nested and loop.s.sink is not None:
            return aforwarded(items, loop.s.sink, loop.s.ns)
        if printed and not loop.s.nested:
            items = aprinting(items, printed, modes)
        if self.release_thread is not None and not loop.s.nested:
            return areleased(items, loop, self.release_thread)
        return items

    def _loop(
        self,
        config: Mapping[str, Any] | None,
        modes: frozenset[str],
        options: dict[str, Any],
        invoked: bool = False,
    ) -> RunLoop:
        """The loop of one run; ``invoked``: started by ``invoke`` (its chunks, which a
        subgraph's parent may stream, show the output schema's keys only, as in LangGraph)."""
        unknown = options.keys() - _OPTIONS if options else ()
        if unknown:
            raise TypeError(f"unexpected keyword argument {sorted(unknown)[0]!r}")
        config = dict(self._bound(config) or {})
        parent = current_task()
        nested = parent is not None
        inner = nested_run(self.checkpointer, parent) if parent is not None else None
        saver = inner.saver if inner is not None else self._own_saver()
        configurable = dict(config.get("configurable") or {})
        if parent is not None:
            configurable = {**parent.config.get("configurable", {}), **configurable}
            config = {**parent.config, **config, "configurable": configurable}
        thread_id = thread_id_of(configurable, saver)
        durability = options.get("durability") or (
            parent.durability if parent is not None else "sync"
        )
        if durability not in DURABILITY:
            raise ConfigError(f"durability must be one of {DURABILITY}, got {durability!r}")
        before, after = self.interrupt_before, self.interrupt_after
        if "interrupt_before" in options or "interrupt_after" in options:
            before, after = self._breakpoints(options)
        settings = RunSettings(
            thread_id=thread_id,
            ns=inner.ns if inner is not None else "",
            checkpoint_id=None if parent is not None else configurable.get("checkpoint_id"),
            config=config,
            metadata=self._metadata(config, configurable),
            stream_modes=modes,
            interrupt_before=before,
            interrupt_after=after,
            durability=durability,
            recursion_limit=recursion_limit(config),
            nested=nested,
            persistent=inner is not None and inner.persistent,
            lent_saver=inner.lent_saver if inner is not None else None,
            parents=inner.parents if inner is not None else {},
            parent_answers=dict(parent.answers) if parent is not None else {},
            parent_spare=parent.spare if parent is not None else None,
        )
        if parent is not None:
            # As in LangGraph, a subgraph's chunks (custom ones too) reach the caller only when
            # it streams with subgraphs=True.
            if parent.sink is not None:
                settings.sink = parent.sink
                settings.stream_modes = parent.modes
        else:
            settings.subgraphs = bool(options.get("subgraphs"))
        store = self.store if self.store is not None or parent is None else parent.store
        context = coerce_context(self.context_schema, options.get("context"))
        settings.context = context if context or parent is None else parent.env.context
        settings.control = options.get("control") or (
            parent.env.control if parent is not None else None
        )
        settings.cache = self.cache
        settings.invoked = invoked
        if self.migrations is not None:
            settings.upgrade = self.migrations.upgrade
        if self.trace and saver is not None and (parent is None or parent.env.trace is not None):
            settings.trace = RunTrace()
        return RunLoop(self.spec, saver, store, settings)

    def _breakpoints(self, options: dict[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
        """The breakpoints of a run given ``interrupt_before``/``interrupt_after``."""
        from threadline.graph.state_graph import breakpoint_names  # (it imports this module)

        spec, before, after = self.spec, self.interrupt_before, self.interrupt_after
        if options.get("interrupt_before") is not None:
            before = breakpoint_names(spec, options["interrupt_before"], "interrupt_before")
        if options.get("interrupt_after") is not None:
            after = breakpoint_names(spec, options["interrupt_after"], "interrupt_after")
        return before, after

    def _metadata(
        self, config: Mapping[str, Any], configurable: Mapping[str, Any]
    ) -> dict[str, Any]:
        """What a checkpoint this graph saves keeps in metadata: with its state version."""
        metadata = checkpoint_metadata(config, configurable)
        if self.migrations is not None:
            metadata[VERSION_KEY] = self.migrations.version
        return metadata

    def _upgraded(self, record: CheckpointRecord) -> CheckpointRecord:
        """A loaded record in this graph's state shape."""
        return record if self.migrations is None else self.migrations.upgrade(record)

    def _own_saver(self) -> BaseSaver | None:
        """The saver of a run of this graph on its own (not inside another graph's node)."""
        if self.checkpointer is True:
            raise ConfigError(
                "checkpointer=True cannot be used for root graphs: it makes a subgraph keep its "
                "own history on its parent's thread; give this graph a saver to run it alone"
            )
        return self.checkpointer if isinstance(self.checkpointer, BaseSaver) else None

    # ------------------------------------------------------------------ node cache
    def clear_cache(self, nodes: Sequence[str] | None = None) -> None:
        """Forget the cached results of ``nodes`` (every node when not given)."""
        self._require_cache().clear(self._cache_namespaces(nodes))

    async def aclear_cache(self, nodes: Sequence[str] | None = None) -> None:
        await self._require_cache().aclear(self._cache_namespaces(nodes))

    def _require_cache(self) -> BaseCache[Any]:
        if self.cache is None:
            raise ConfigError("this graph has no cache to clear; compile(cache=InMemoryCache())")
        return self.cache

    def _cache_namespaces(self, nodes: Sequence[str] | None) -> list[tuple[str, ...]]:
        unknown = [n for n in nodes or () if n not in self.spec.nodes]
        if unknown:
            raise ConfigError(
                f"clear_cache names {unknown[0]!r}, which is not a node "
                f"(nodes: {', '.join(self.spec.nodes)})"
            )
        specs = [self.spec.nodes[n] for n in nodes] if nodes else self.spec.nodes.values()
        return [node.cache.namespace for node in specs if node.cache is not None]

    # ------------------------------------------------------------------ composition
    def as_node(
        self,
        name: str,
        retry: tuple[RetryPolicy, ...],
        destinations: Sequence[str] | None,
        parent: StateSchema,
    ) -> NodeSpec:
        """Wrap this graph as a node of a parent graph (a subgraph)."""
        from threadline.graph.subgraph import subgraph_callables

        if self.release_thread is not None:
            raise GraphValidationError(
                f"node {name!r} is a graph compiled with release_thread=; a subgraph's "
                "checkpoints live on its parent's thread, so release threads on the parent"
            )
        sync_fn, async_fn = subgraph_callables(self, parent)
        declared = tuple(destinations) if destinations is not None else None
        return NodeSpec(name, sync_fn, async_fn, CallStyle(), retry, declared, subgraph=self)

    def get_graph(
        self, config: Mapping[str, Any] | None = None, *, xray: int | bool = False
    ) -> Any:
        """A drawable view of the graph (``.draw_mermaid()``). ``config`` changes nothing in
        it; ``xray`` (drawing the subgraphs' own nodes) is not supported for graphs that have
        subgraphs, and changes nothing in those that have none, as in LangGraph."""
        from threadline.graph.drawing import DrawableGraph

        if xray and any(node.subgraph is not None for node in self.spec.nodes.values()):
            raise NotSupportedError("get_graph(xray=...) does not draw subgraphs' nodes yet")
        return DrawableGraph.of(self.spec)
