"""The real command, in a child process: ``python -m threadline.cli`` from a clean shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def threadline(cwd: Path, *args: str, code: int = 0, env: dict[str, str] | None = None) -> Any:
    result = subprocess.run(
        [sys.executable, "-m", "threadline.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def test_a_paused_thread_end_to_end(tmp_path: Path, db: str) -> None:
    env = {"THREADLINE_DB": db}
    listed = threadline(tmp_path, "threads", "list", "--status", "interrupted", "--json", env=env)
    assert "a" in [t["thread_id"] for t in json.loads(listed.stdout)]
    resumed = threadline(
        tmp_path,
        "resume",
        "a",
        "--value",
        '"yes"',
        "--graph",
        "flows.py:approval",
        "--json",
        env=env,
    )
    assert json.loads(resumed.stdout)["values"]["answer"] == "yes!"
    state = json.loads(threadline(tmp_path, "state", "a", "--json", env=env).stdout)
    assert state["status"] == "idle"
    history = json.loads(threadline(tmp_path, "history", "a", "--json", env=env).stdout)
    assert [r["step"] for r in history] == [2, 1, 0, -1]
    trace = json.loads(threadline(tmp_path, "trace", "a", "--json", env=env).stdout)
    assert [e["kind"] for e in trace] == ["node", "interrupt", "resume", "node", "node"]


def test_exit_codes(tmp_path: Path, db: str) -> None:
    missing = threadline(tmp_path, "state", "ghost", "--db", db, code=3)
    assert "error: no thread 'ghost'" in missing.stderr
    bad = threadline(tmp_path, "threads", "list", "--db", "mysql://x", code=2)
    assert "mysql://x" in bad.stderr
