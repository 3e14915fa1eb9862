# ruff: noqa: RUF001
"""Every case of the suite, in run order: which workload runs on which backend, what it reports
and the target each figure is held to."""

from __future__ import annotations

from dataclasses import replace

from bench.measures import (
    FASTER_3,
    FASTER_5,
    FASTER_8,
    FASTER_10,
    FLAT,
    MORE_8,
    ONE_COMMIT,
    RAW_3X,
    WRITTEN_ONCE,
    Case,
    Metric,
    Scale,
)
from bench.row_bytes import row_cases
from bench.trace_cost import trace_case
from bench.workloads import (
    blob_case,
    chain_case,
    concurrency_case,
    conversation_case,
    fanout_case,
    history_case,
    interrupt_case,
)


def cases(scale: Scale) -> list[Case]:
    """Every case of the suite, in run order."""
    out: list[Case] = []
    a = "(a) chain of 50 nodes"
    us = Metric("us_per_step", "µs per step", "us")
    commits = Metric(
        "commits_per_checkpoint", "write commits per checkpoint", "per step", "lower", ONE_COMMIT
    )
    saved = Metric(
        "checkpoints_per_run", f"checkpoints saved per run of {scale.chain_nodes}", "count", "info"
    )
    out.append(
        Case(
            "a.none",
            a,
            "no saver",
            "none",
            (replace(us, target=FASTER_10),),
            chain_case("none", None),
        )
    )
    for backend, target in (
        ("memory", FASTER_10),
        ("sqlite", FASTER_8),
        ("sqlite-full", None),  # synchronous="full": one fsync per commit, as LangGraph's
        ("postgres", FASTER_3),
        ("redis", None),
    ):
        once = backend in ("redis", "sqlite-full")
        for durability in ("sync",) if once else ("sync", "async", "exit"):
            metrics: tuple[Metric, ...] = (
                replace(us, target=target if durability == "sync" else None),
            )
            if backend == "sqlite":
                metrics += (
                    commits if durability == "sync" else replace(commits, target=None),
                    saved,
                )
            out.append(
                Case(
                    f"a.{backend}.{durability}",
                    a,
                    f"{backend}, durability={durability}",
                    backend,
                    metrics,
                    chain_case(backend, durability),
                )
            )
    out.append(trace_case(scale))

    b = f"(b) conversation, {scale.turns} turns × 2 msgs of ~1 KB"
    for backend in ("sqlite", "postgres", "redis", "files"):
        out.append(
            Case(
                f"b.{backend}",
                b,
                backend,
                backend,
                (
                    Metric("raw_bytes", "raw message bytes (JSON)", "bytes", "info"),
                    Metric("bytes", "bytes stored", "bytes"),
                    Metric("bytes_over_raw", "stored / raw message bytes", "x", "lower", RAW_3X),
                    Metric("turn_early_ms", "ms, turn 10 (median of turns 6–15)", "ms"),
                    Metric("turn_late_ms", f"ms, turn {scale.turns} (median of the last 10)", "ms"),
                    Metric("late_over_early", f"turn {scale.turns} / turn 10", "x", "lower", FLAT),
                ),
                conversation_case(backend),
            )
        )

    for size in scale.blob_sizes:
        c = f"(c) {size // 1_000_000} MB value set once, 9 steps leave it alone"
        for backend in ("memory", "sqlite", "postgres"):
            metrics = (Metric("ms_per_step", "ms per step", "ms"),)
            if backend != "memory":
                metrics += (
                    Metric("bytes", "bytes stored", "bytes"),
                    Metric(
                        "bytes_over_value",
                        "stored / value size",
                        "x",
                        "lower",
                        WRITTEN_ONCE if size >= 10_000_000 else None,
                    ),
                )
            out.append(
                Case(
                    f"c.{size // 1_000_000}mb.{backend}",
                    c,
                    backend,
                    backend,
                    metrics,
                    blob_case(backend, size),
                )
            )

    d = "(d) run to interrupt() + resume"
    for backend in ("sqlite", "postgres"):
        out.append(
            Case(
                f"d.{backend}",
                d,
                backend,
                backend,
                (
                    Metric(
                        "fresh_ms",
                        "ms, fresh thread",
                        "ms",
                        "lower",
                        FASTER_5 if backend == "sqlite" else None,
                    ),
                    Metric(
                        "history_ms",
                        f"ms, thread with ≥{scale.history:,} checkpoints",
                        "ms",
                        "lower",
                        FASTER_5 if backend == "sqlite" else None,
                    ),
                    Metric(
                        "history_over_fresh",
                        "long thread / fresh",
                        "x",
                        "lower",
                        FLAT if backend == "sqlite" else None,
                    ),
                    Metric(
                        "history_checkpoints", "checkpoints on the long thread", "count", "info"
                    ),
                ),
                interrupt_case(backend),
            )
        )

    e = f"(e) get_state_history, {scale.history:,} checkpoints"
    for backend in ("memory", "sqlite", "postgres"):
        out.append(
            Case(
                f"e.{backend}",
                e,
                backend,
                backend,
                (
                    Metric("ms", "ms per listing", "ms"),
                    Metric("us_per_checkpoint", "µs per checkpoint", "us"),
                ),
                history_case(backend),
            )
        )

    f = f"(f) Send fan-out, 1 vs {scale.fanout} branches"
    for backend in ("none", "memory", "sqlite"):
        out.append(
            Case(
                f"f.{backend}",
                f,
                backend,
                backend,
                (
                    Metric("one_ms", "ms, 1 branch", "ms"),
                    Metric("wide_ms", f"ms, {scale.fanout} branches", "ms"),
                    Metric("us_per_branch", "µs per extra branch", "us", "lower", FASTER_10),
                ),
                fanout_case(backend),
            )
        )

    g = f"(g) {scale.threads} threads × {scale.async_nodes} async steps, ainvoke + gather"
    for backend, target in (("none", None), ("memory", None), ("postgres", MORE_8)):
        out.append(
            Case(
                f"g.{backend}",
                g,
                backend,
                backend,
                (Metric("steps_per_s", "steps/s", "steps/s", "higher", target),),
                concurrency_case(backend),
            )
        )
    out.extend(row_cases(scale))
    return out
