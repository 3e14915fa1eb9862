"""The scale-out soak: an API server and three worker processes on PostgreSQL, hundreds of
runs, a worker SIGKILLed mid-step again and again (``make soak SOAK_ARGS=--server``).

Each round starts ``--runs`` runs (a third stop for a person and are answered over HTTP),
kills a worker mid-step ``--kills`` times (a fresh worker replaces each), waits for every run
and checks, from the steps' own records: every step ran once (a step a kill cut may run
again, and is counted), no two steps of a thread overlapped, every run and thread ended
right, each run's stream holds each step once. ``tests/server/test_scale_out.py`` is the
short version.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "server"), str(HERE.parent / "tests")]

from scale import check, cluster, workload  # noqa: E402
from services import postgres_url  # noqa: E402


async def one_round(db: str, logs: Path, runs: int, kills: int, delay: float) -> list[str]:
    started = time.monotonic()
    with cluster(db, logs) as c:
        out = await workload(c, runs, delay=delay, kills=kills, replace=True)
        audit = check(c, out.expected)
    problems = out.problems + audit.problems
    if out.stream_repeats > audit.rerun_after_end:  # only a step that ran again may repeat
        problems.append(f"{out.stream_repeats} steps repeated in run streams")
    takeover = ", ".join(f"{s:.1f}" for s in audit.takeover_seconds) or "-"
    print(
        f"runs {len(out.runs):>4}  kills {kills}  steps {audit.steps:>5}  cut {audit.cut:>3}  "
        f"ran again after ending {audit.rerun_after_end:>2}  "
        f"in streams twice {out.stream_repeats:>2}  takeover s {takeover}  "
        f"problems {len(problems)}  {time.monotonic() - started:.0f} s",
        flush=True,
    )
    return problems


def soak(rounds: int, runs: int, kills: int, delay: float) -> int:
    """``rounds`` rounds; 0 when nothing went wrong."""
    failed = 0
    for _ in range(rounds):
        logs = Path(tempfile.mkdtemp(prefix="server-soak-"))
        problems = asyncio.run(one_round(postgres_url(), logs, runs, kills, delay))
        for problem in problems[:20]:
            print(f"  FAILED {problem}  (worker logs: {logs})")
        failed += bool(problems)
    print(f"server soak: {rounds} rounds, {failed} failed")
    return 1 if failed else 0
