"""The kill harness at length: thousands of SIGKILLs on every saver (``make soak``).

Runs the trials of ``tests/crash/harness.py`` (a graph, graph nodes with tasks, sync and async
entrypoints with tasks, an entrypoint that stops at an interrupt; each killed 1 to 4 times at
named points or at random times, then continued in fresh processes until finished) and prints,
per saver, the trials, the kills by kill point, the processes, the at-least-once repeats and the
failures. Figures: docs/durability.md, "Kill harness".

    python -m bench.kill_soak                        # 600 trials per saver
    python -m bench.kill_soak --trials 100 --backends sqlite files
    python -m bench.kill_soak --only redis:approval:async:1300042   # replay one trial
    python -m bench.kill_soak --server       # scale-out soak (bench/server_soak.py)

PostgreSQL and Redis come from THREADLINE_TEST_POSTGRES_URL / THREADLINE_TEST_REDIS_URL (local
defaults, as the tests). A failed trial keeps its folder (side-effect log, round reports).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from tests.crash.harness import BACKENDS, KILL_POINTS, Report, Trial, place, trials
from tests.services import postgres_url, redis_url


def server(backend: str) -> str | None:
    return {"postgres": postgres_url, "redis": redis_url}.get(backend, lambda: None)()


def soak(backends: list[str], count: int, seed: int, workers: int, workdir: Path) -> Report:
    total = Report()
    print(f"{'saver':<9} {'trials':>6} {'kills':>6} {'procs':>6} {'repeats':>7} {'fails':>5} "
          f"{'secs':>6}  kills by point")  # fmt: skip
    for backend in backends:
        with place(backend, server(backend), workdir) as harness:
            report = harness.run(trials(count, seed), workers=workers)
        by_point = report.kills_by("point")
        print(
            f"{backend:<9} {len(report.outcomes):>6} {report.kills:>6} "
            f"{sum(o.rounds for o in report.outcomes):>6} "
            f"{sum(o.repeats for o in report.outcomes):>7} {len(report.failures):>5} "
            f"{report.seconds:>6.0f}  " + " ".join(f"{p}={by_point[p]}" for p in KILL_POINTS),
            flush=True,
        )
        for failure in report.failures:
            print(f"  FAILED {failure}", flush=True)
        total.merge(report)
    print(f"total: {total.summary()}")
    return total


def replay(only: str, workdir: Path) -> int:
    backend, workload, durability, seed = only.split(":")
    with place(backend, server(backend), workdir) as harness:
        outcome = harness.trial(Trial(workload, durability, int(seed)))
    print(outcome)
    if outcome.failures:
        print(f"its files: {workdir}")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=600, help="trials per saver")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--workers", type=int, default=4, help="trials run at once")
    parser.add_argument("--only", help="replay one trial: backend:workload:durability:seed")
    parser.add_argument("--server", action="store_true", help="the scale-out soak instead")
    parser.add_argument("--rounds", type=int, default=3, help="--server: clusters in turn")
    parser.add_argument("--runs", type=int, default=300, help="--server: threads per round")
    parser.add_argument("--kills", type=int, default=5, help="--server: SIGKILLs per round")
    args = parser.parse_args()
    if args.server:
        from bench.server_soak import soak as server_soak

        return server_soak(args.rounds, args.runs, args.kills, delay=0.3)
    workdir = Path(tempfile.mkdtemp(prefix="kill-soak-"))
    if args.only:
        return replay(args.only, workdir)
    report = soak(args.backends, args.trials, args.seed, args.workers, workdir)
    if report.failures:
        print(f"failed trials keep their files under {workdir}")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
