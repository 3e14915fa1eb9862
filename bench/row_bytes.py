"""What one checkpoint costs in storage: cases ``h.<backend>``.

A graph whose one node bumps a counter, looping until it has run ``Scale.counter_steps`` times:
every checkpoint holds one small integer, so the bytes stored are almost all per-checkpoint
overhead (the row, its key's index, the execution trace), the cost that dominates a long
conversation of short messages. Fresh storage per repetition; bytes as in (b), divided by the
checkpoints the thread holds (``get_state_history``). Each library runs with its defaults
(threadline's trace on)::

    python -m bench.run --only 'h.*'
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, TypedDict

from bench.backends import Env, opener
from bench.libs import Lib
from bench.measures import Case, Measure, Metric, Scale, Target, check

TARGETS = {
    "sqlite": Target("≤ 200 B", abs_max=200),
    "postgres": Target("≤ 300 B", abs_max=300),
}


class Counter(TypedDict):
    n: int


def counter_graph(lib: Lib, steps: int) -> Any:
    g = lib.StateGraph(Counter)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(lib.START, "inc")
    g.add_conditional_edges("inc", lambda s: lib.END if s["n"] >= steps else "inc")
    return g


def row_cases(scale: Scale) -> list[Case]:
    workload = f"(h) counter loop, {scale.counter_steps:,} steps"
    return [
        Case(
            f"h.{backend}",
            workload,
            backend,
            backend,
            (
                Metric("bytes_per_checkpoint", "bytes per checkpoint", "bytes", "lower", target),
                Metric("checkpoints", "checkpoints stored", "count", "info"),
            ),
            _factory(backend),
        )
        for backend, target in (
            ("sqlite", TARGETS["sqlite"]),
            ("postgres", TARGETS["postgres"]),
            ("redis", None),
            ("files", None),
        )
    ]


def _factory(backend: str) -> Any:
    @contextlib.contextmanager
    def factory(lib: Lib, env: Env, scale: Scale) -> Iterator[Measure]:
        steps = scale.counter_steps

        def measure() -> dict[str, float]:
            with opener(backend, lib.name).open(env) as store:
                graph = counter_graph(lib, steps).compile(checkpointer=store.saver)
                config = {"configurable": {"thread_id": "counter"}, "recursion_limit": steps + 10}
                out = graph.invoke({"n": 0}, config)
                check(out["n"] == steps, f"counter ended at {out.get('n')!r}, expected {steps}")
                count = len(list(graph.get_state_history(config)))
                check(count >= steps, f"{count} checkpoints for {steps} steps")
                stored = store.bytes_stored() if store.bytes_stored is not None else None
            check(stored is not None, f"no size probe for {backend}")
            return {"bytes_per_checkpoint": stored / count, "checkpoints": count}

        yield measure

    return factory
