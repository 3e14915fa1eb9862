"""What the execution trace costs: case ``a.sqlite.trace``, threadline only.

The 50-node chain of (a) on one SQLite saver, compiled twice: with the trace (the default) and
with ``compile(trace=False)``. A repetition invokes the two in pairs, alternating which goes
first (on/off, off/on, ...), each on a new thread; a pair's ratio compares two invokes made
moments apart, so a slow phase of a busy machine slows both. The repetition's figures are the
medians over its pairs: wall-clock µs per step of each, and the on/off ratio of wall-clock and of
CPU time (``time.process_time``, less disturbed by other jobs on the machine)::

    python -m bench.run --only a.sqlite.trace --libs threadline
"""

from __future__ import annotations

import contextlib
import itertools
import statistics
import time
from collections.abc import Iterator
from typing import Any

from bench.backends import Env, opener
from bench.libs import Lib
from bench.measures import Case, Measure, Metric, Scale, Target, check
from bench.workloads import chain_graph

UNDER_5_PERCENT = Target("< 5% (ratio ≤ 1.05)", abs_max=1.05)


def trace_case(scale: Scale) -> Case:
    return Case(
        "a.sqlite.trace",
        f"(a) chain of {scale.chain_nodes} nodes",
        "sqlite, sync: trace on vs compile(trace=False)",
        "sqlite",
        (
            Metric("us_per_step", "µs per step, trace on", "us"),
            Metric("us_per_step_off", "µs per step, trace=False", "us"),
            Metric("trace_wall", "trace on / off, wall clock", "x", "lower", UNDER_5_PERCENT),
            Metric("trace_cpu", "trace on / off, CPU time", "x", "lower", UNDER_5_PERCENT),
        ),
        _factory,
        libs=("threadline",),
    )


@contextlib.contextmanager
def _factory(lib: Lib, env: Env, scale: Scale) -> Iterator[Measure]:
    n = scale.chain_nodes
    with opener("sqlite", lib.name).open(env) as store:
        builder = chain_graph(lib, n)
        graphs = {
            "on": builder.compile(checkpointer=store.saver),
            "off": builder.compile(checkpointer=store.saver, trace=False),
        }
        ids = itertools.count()

        def run_once(variant: str) -> tuple[float, float, dict[str, Any]]:
            config = {"configurable": {"thread_id": f"trace-{variant}-{next(ids)}"}}
            t0, c0 = time.perf_counter(), time.process_time()
            out = graphs[variant].invoke({"n": 0}, config, durability="sync")
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            check(out["n"] == n, f"chain ended with n={out.get('n')!r}, expected {n}")
            return wall, cpu, config

        for variant in graphs:  # warm-up, and proof that only "on" keeps a trace
            *_, config = run_once(variant)
            entries = len(graphs[variant].get_trace(config))
            expected = entries >= n if variant == "on" else entries == 0
            check(expected, f"trace {variant}: {entries} entries for {n} nodes")

        def measure() -> dict[str, float]:
            on_wall, off_wall, wall_ratios, cpu_ratios = [], [], [], []
            for i in range(scale.trace_pairs):
                pair = {}
                for variant in ("on", "off") if i % 2 == 0 else ("off", "on"):
                    pair[variant] = run_once(variant)[:2]
                on_wall.append(pair["on"][0])
                off_wall.append(pair["off"][0])
                wall_ratios.append(pair["on"][0] / pair["off"][0])
                cpu_ratios.append(pair["on"][1] / pair["off"][1])
            return {
                "us_per_step": statistics.median(on_wall) / n * 1e6,
                "us_per_step_off": statistics.median(off_wall) / n * 1e6,
                "trace_wall": statistics.median(wall_ratios),
                "trace_cpu": statistics.median(cpu_ratios),
            }

        yield measure
