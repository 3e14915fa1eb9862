"""`make demo` end to end: pause in one process, resume in another, on a real SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "examples" / "approval_demo.py"


def _run(db: Path, *args: str) -> str:
    env = {**os.environ, "THREADLINE_DEMO_DB": str(db)}
    done = subprocess.run(
        [sys.executable, str(DEMO), *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_demo_pauses_in_one_process_and_finishes_in_another(tmp_path: Path) -> None:
    db = tmp_path / "demo" / "approval.db"
    first = _run(db, "start")
    assert "waiting for a human" in first
    assert '"question": "Approve this refund?"' in first
    assert "next: ('human_review',)" in first
    assert db.exists()

    second = _run(db, "resume", "reject")
    assert "found thread waiting at ('human_review',)" in second
    assert "outcome: refund for Ada declined" in second
    assert "reviewed: reject" in second
    assert "5 checkpoints on the thread" in second


def test_resuming_twice_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "approval.db"
    _run(db, "start")
    _run(db, "resume", "approve")
    env = {**os.environ, "THREADLINE_DEMO_DB": str(db)}
    again = subprocess.run(
        [sys.executable, str(DEMO), "resume", "approve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode != 0
    assert "NothingToResumeError" in again.stderr
    assert "its run has finished" in again.stderr
