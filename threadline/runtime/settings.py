"""``RunSettings``: everything about one invocation of a graph that is not the graph itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadline.cache.base import BaseCache
from threadline.checkpoint.base import BaseSaver, CheckpointRecord
from threadline.runtime.chunks import Emit
from threadline.runtime.context import SpareAnswer
from threadline.runtime.trace import RunTrace

if TYPE_CHECKING:
    from threadline.runtime.runtime import RunControl


@dataclass(slots=True)
class RunSettings:
    """Everything about one invocation that is not the graph itself."""

    thread_id: str | None
    ns: str = ""
    checkpoint_id: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    stream_modes: frozenset[str] = frozenset()
    interrupt_before: frozenset[str] = frozenset()
    interrupt_after: frozenset[str] = frozenset()
    durability: str = "sync"
    recursion_limit: int = 10_000
    nested: bool = False
    # A nested run of a checkpointer=True subgraph: one history per thread, new input each call
    persistent: bool = False
    # A nested run of a checkpointer=False subgraph: the saver above it, which keeps the answers
    # to its interrupts (it saves nothing itself)
    lent_saver: BaseSaver | None = None
    # A nested run: the checkpoints of the runs above it, by namespace (metadata ``parents``)
    parents: dict[str, str] = field(default_factory=dict)
    parent_answers: dict[str, Any] = field(default_factory=dict)
    # A nested run: the spare resume value of its parent's step (the first interrupt() takes it)
    parent_spare: SpareAnswer | None = None
    # stream(subgraphs=True): subgraph runs hand their chunks to ``sink`` (set by the driver)
    subgraphs: bool = False
    sink: Callable[[Emit], None] | None = None
    context: Any = None  # invoke(..., context=...): what ``Runtime.context`` holds
    # compile(cache=...): where nodes with a CachePolicy keep their results
    cache: BaseCache[Any] | None = None
    invoked: bool = False  # started by invoke(): chunks show the output schema's keys only
    # A graph with state migrations: a loaded record as this graph reads it (runtime/migrate.py)
    upgrade: Callable[[CheckpointRecord], CheckpointRecord] | None = None
    trace: RunTrace | None = None  # the run's execution trace; None with compile(trace=False)
    # invoke(..., control=...): a drain request stops the run before its next step
    control: RunControl | None = None
