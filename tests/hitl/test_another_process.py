"""A review answered from other processes, on one SQLite file: each step is a new process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

APP = Path(__file__).with_name("refund_app.py")
ROOT = Path(__file__).resolve().parents[2]  # this checkout's threadline, not an installed one


def step(tmp_path: Path, *args: str, fails: bool = False) -> Any:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    db, ledger = str(tmp_path / "refunds.db"), str(tmp_path / "ledger.txt")
    done = subprocess.run(
        [sys.executable, str(APP), db, ledger, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if fails:
        assert done.returncode == 2, done.stderr
        return done.stderr
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_review_edit_and_typed_confirmation_across_processes(tmp_path: Path) -> None:
    started = step(tmp_path, "start")
    (asked,) = started["asked"]
    assert asked["value"]["action_requests"] == [
        {
            "name": "refund",
            "args": {"order": "A1", "amount": 30},
            "description": "Refunds move real money",
        }
    ]
    assert ledger(tmp_path) == []

    bad_edit = json.dumps([{"type": "edit", "args": {"order": "A1", "amount": "lots"}}])
    error = step(tmp_path, "resume", bad_edit, fails=True)
    assert "InvalidAnswerError" in error and "decisions[0].args.amount: expected number" in error

    edited = json.dumps({"decisions": [{"type": "edit", "args": {"order": "A1", "amount": 20}}]})
    confirming = step(tmp_path, "resume", edited)
    (asked,) = confirming["asked"]
    assert asked["value"] == {"result": "refunded 20 on A1"}
    assert asked["schema"]["required"] == ["confirmed", "by"]
    assert ledger(tmp_path) == ["A1 20"]

    error = step(tmp_path, "resume", json.dumps({"confirmed": "sure", "by": "eve"}), fails=True)
    assert "confirmed: expected boolean, got str 'sure'" in error

    done = step(tmp_path, "resume", json.dumps({"confirmed": True, "by": "eve"}))
    assert done == {
        "state": {
            "order": "A1",
            "amount": 30,
            "result": "refunded 20 on A1",
            "confirmed_by": "eve",
        },
        "asked": [],
    }
    assert ledger(tmp_path) == ["A1 20"]  # the node ran three times, the refund once
