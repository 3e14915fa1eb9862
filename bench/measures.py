# ruff: noqa: RUF001
"""What a case is and how it is judged: sizes (``Scale``), metrics, targets, and the result check.

A case is a context manager factory ``factory(lib, env, scale)`` that prepares whatever is slow
to set up and yields ``measure()``: one repetition, returning ``{metric_key: value}``.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from bench.backends import Env
from bench.libs import Lib

Measure = Callable[[], dict[str, float]]
Factory = Callable[[Lib, Env, "Scale"], contextlib.AbstractContextManager[Measure]]


class BenchCheckError(AssertionError):
    """A timed call returned the wrong result: the figure would be meaningless."""


def check(ok: bool, what: str) -> None:
    if not ok:
        raise BenchCheckError(what)


def now() -> float:
    return time.perf_counter()


def median(xs: list[float]) -> float:
    return statistics.median(xs)


# ------------------------------------------------------------------------------ sizes


@dataclass(frozen=True)
class Scale:
    """How big each workload is. ``FULL`` is the suite; ``QUICK`` is the 1-minute smoke run."""

    reps: int = 5
    chain_nodes: int = 50
    chain_invokes: int = 3  # timed invokes per repetition (their median is the rep's figure)
    trace_pairs: int = 200  # trace on/off invoke pairs per repetition (``bench/trace_cost.py``)
    turns: int = 200
    blob_sizes: tuple[int, ...] = (1_000_000, 10_000_000)
    history: int = 1_000
    cycles: int = 3  # interrupt/resume cycles per repetition
    listings: int = 3
    fanout: int = 100
    fanout_invokes: int = 5
    threads: int = 200
    async_nodes: int = 10
    floor_ops: int = 1_000
    counter_steps: int = 2_000  # (h): checkpoints of the counter loop


FULL = Scale()
QUICK = replace(
    FULL,
    reps=1,
    chain_invokes=2,
    trace_pairs=30,
    turns=40,
    history=200,
    cycles=2,
    listings=2,
    threads=50,
    floor_ops=200,
    counter_steps=300,
)


# ------------------------------------------------------------------------------ metrics


@dataclass(frozen=True)
class Target:
    """A goal for threadline, checked on the medians of the same run.

    ``ratio_max``/``ratio_min`` bound threadline/LangGraph; ``abs_max`` bounds threadline's own
    figure (e.g. commits per step).
    """

    text: str
    ratio_max: float | None = None
    ratio_min: float | None = None
    abs_max: float | None = None

    def met(self, tl: float | None, lg: float | None) -> bool | None:
        if tl is None:
            return None
        if self.abs_max is not None:
            return tl <= self.abs_max
        if lg is None or lg == 0:
            return None
        ratio = tl / lg
        if self.ratio_max is not None:
            return ratio <= self.ratio_max
        if self.ratio_min is not None:
            return ratio >= self.ratio_min
        return None


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str  # "us", "ms", "bytes", "x", "per step", "steps/s", "count"
    better: str = "lower"  # "lower", "higher" or "info"
    target: Target | None = None


@dataclass(frozen=True)
class Case:
    key: str
    workload: str
    label: str
    backend: str
    metrics: tuple[Metric, ...]
    factory: Factory
    libs: tuple[str, ...] = ("threadline", "langgraph")


FASTER_10 = Target("≥10× faster (ratio ≤ 0.10)", ratio_max=0.10)
FASTER_8 = Target("≥8× faster (ratio ≤ 0.125)", ratio_max=0.125)
FASTER_5 = Target("≥5× faster (ratio ≤ 0.20)", ratio_max=0.20)
FASTER_3 = Target("≥3× faster (ratio ≤ 0.33)", ratio_max=1 / 3)
ONE_COMMIT = Target("1 per step (checkpoint)", abs_max=1.0)
FLAT = Target("≤ 1.2", abs_max=1.2)
RAW_3X = Target("≤ 3× raw", abs_max=3.0)
WRITTEN_ONCE = Target("written once (≤ 1.5× value)", abs_max=1.5)
MORE_8 = Target("≥8× more (ratio ≥ 8)", ratio_min=8.0)
