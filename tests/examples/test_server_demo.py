"""`make serve-demo` end to end: `threadline serve` in a process, a refund answered over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "examples" / "server" / "demo.py"


def test_the_demo_serves_answers_a_refund_and_leaves_one_waiting(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "THREADLINE_DEMO_DB": str(tmp_path / "server.db")}
    done = subprocess.run(
        [sys.executable, str(DEMO), "--exit", "--port", str(port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "1 thread(s) wait for a person:" in out
    assert "Refund 42.00 to Ada?" in out
    assert "the thread's log: ['reviewed: approve', 'paid 42.00 to Ada']" in out
    assert "a second refund waits" in out
    assert (tmp_path / "server.db").exists()
