"""What the execution trace costs: the 50-node SQLite chain of ``make bench``, interleaved.

Each variant runs in a child process of its own, so two checkouts of threadline can be
compared: ``on`` (this checkout, trace on, the default), ``off`` (this checkout,
``compile(trace=False)``) and, with ``--base DIR``, ``base`` (the ``threadline`` package found in
``DIR``, e.g. an export of the commit this branch started from). Rounds alternate the order of
the variants; each child times several invokes on a fresh SQLite file and reports the median
wall-clock and CPU µs per step. The figure per variant is the median of its rounds::

    python -m bench.trace_cost --rounds 15
    git archive <commit> threadline | tar -x -C /tmp/base
    python -m bench.trace_cost --base /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, statistics, sys, tempfile, time
from typing import TypedDict
from threadline import END, START, StateGraph
from threadline.checkpoint import SqliteSaver

variant, nodes, invokes, durability = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

class S(TypedDict, total=False):
    n: int

def inc(state):
    return {"n": state["n"] + 1}

g = StateGraph(S)
prev = START
for i in range(nodes):
    g.add_node(f"step_{i:03d}", inc)
    g.add_edge(prev, f"step_{i:03d}")
    prev = f"step_{i:03d}"
g.add_edge(prev, END)
with tempfile.TemporaryDirectory() as tmp:
    saver = SqliteSaver(os.path.join(tmp, "chain.sqlite"))
    graph = g.compile(checkpointer=saver, **({"trace": False} if variant == "off" else {}))
    times, cpu = [], []
    for i in range(invokes + 2):  # two warm-up invokes
        config = {"configurable": {"thread_id": f"t{i}"}}
        t0, c0 = time.perf_counter(), time.process_time()
        out = graph.invoke({"n": 0}, config, durability=durability)
        elapsed, used = time.perf_counter() - t0, time.process_time() - c0
        assert out["n"] == nodes, out
        if i >= 2:
            times.append(elapsed)
            cpu.append(used)
    if variant == "on":  # the trace really was written
        assert len(graph.get_trace(config)) >= nodes
    saver.close()
print(json.dumps([statistics.median(xs) / nodes * 1e6 for xs in (times, cpu)]))
"""


def run_variant(
    variant: str, path: str, nodes: int, invokes: int, durability: str
) -> tuple[float, float]:
    """The child's median wall-clock and CPU µs per step."""
    env = {**os.environ, "PYTHONPATH": path}
    args = [sys.executable, "-c", CHILD, variant, str(nodes), str(invokes), durability]
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True, cwd=path)
    wall, cpu = json.loads(out.stdout)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--invokes", type=int, default=15)
    parser.add_argument("--durability", default="sync", choices=("sync", "async", "exit"))
    parser.add_argument("--base", help="a folder holding the threadline package to compare with")
    args = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    variants = {"on": here, "off": here}
    if args.base:
        variants["base"] = os.path.abspath(args.base)
    figures: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    names = list(variants)
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        if r % 2:
            order.reverse()
        for v in order:
            figures[v].append(
                run_variant(v, variants[v], args.nodes, args.invokes, args.durability)
            )
    print(f"SQLite chain of {args.nodes} nodes, durability={args.durability}, {args.rounds} rounds")
    for i, what in enumerate(("wall", "cpu")):
        medians = {v: statistics.median(x[i] for x in xs) for v, xs in figures.items()}
        reference = medians.get("base", medians["off"])
        for v, m in medians.items():
            values = [x[i] for x in figures[v]]
            spread = f"{min(values):.1f}-{max(values):.1f}"
            print(f"  {what} {v:5s} {m:7.1f} us/step (rounds {spread}) {m / reference - 1:+.1%}")


if __name__ == "__main__":
    main()
