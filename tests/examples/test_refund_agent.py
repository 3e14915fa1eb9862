"""examples/refund_agent.py end to end: each decision made from the command line in a process
of its own, on one SQLite file; and a process killed inside the refund, after which the
conversation still ends valid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "refund_agent.py"
ASKED = 'assistant asks for refund({"order": "A-1042", "amount": 30, "reason": "damaged parcel"})'
VALID = "history valid: every tool call has exactly one result"


def run(db: Path, *args: str, code: int = 0) -> str:
    env = {**os.environ, "THREADLINE_DEMO_DB": str(db), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(DEMO), *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == code, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "demo" / "refund.db"
    first = run(path, "start")
    assert ASKED in first
    assert (
        'waiting for a person: refund {"order": "A-1042", "amount": 30, "reason": '
        '"damaged parcel"}' in first
    )
    assert "not sendable to a model yet" in first  # the call waits for its result
    return path


def test_approve_refunds_as_asked(db: Path) -> None:
    out = run(db, "resume", "approve")
    assert "tool refund [success]: Refunded 30.00 EUR on order A-1042 (damaged parcel)." in out
    assert out.rstrip().endswith(VALID)


def test_edit_refunds_the_edited_amount_and_the_history_shows_it(db: Path) -> None:
    out = run(db, "resume", "edit", '{"amount": 5}')
    assert 'assistant asks for refund({"order": "A-1042", "amount": 5,' in out
    assert "tool refund [success]: Refunded 5.00 EUR on order A-1042" in out
    assert ASKED not in out and VALID in out


def test_respond_answers_without_refunding(db: Path) -> None:
    out = run(db, "resume", "respond", "Send a photo of the parcel first.")
    assert "tool refund [success]: Send a photo of the parcel first." in out
    assert "Refunded" not in out and VALID in out


def test_reject_answers_with_the_reason_without_refunding(db: Path) -> None:
    out = run(db, "resume", "reject", "Outside the return window.")
    assert (
        "tool refund [error]: User rejected the tool call for `refund` with reason: "
        "Outside the return window." in out
    )
    assert "Refunded" not in out and VALID in out


def test_a_bad_decision_is_refused_and_the_review_still_waits(db: Path) -> None:
    run(db, "resume", "edit", '{"amount": "lots"}', code=1)
    out = run(db, "show")
    assert "waiting for a person: refund" in out and "Refunded" not in out
    assert "not sendable to a model yet" in out
    assert "tool refund [success]: Refunded 30.00 EUR" in run(db, "resume", "approve")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_crash_inside_the_refund_leaves_a_history_that_ends_valid(db: Path) -> None:
    killed = run(db, "resume", "approve", "--crash-in-refund", code=-signal.SIGKILL)
    assert "the process dies inside refund" in killed
    after = run(db, "show")
    assert "stopped before tools: 'continue' runs it, 'say' moves on" in after
    out = run(db, "say", "Never mind.")
    assert "tool refund [error]: Tool call 'refund' (id " in out
    assert "was not executed" in out and "customer: Never mind." in out
    assert out.rstrip().endswith(VALID)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_after_a_crash_continue_runs_the_refund(db: Path) -> None:
    run(db, "resume", "approve", "--crash-in-refund", code=-signal.SIGKILL)
    out = run(db, "continue")
    assert "tool refund [success]: Refunded 30.00 EUR on order A-1042" in out
    assert out.rstrip().endswith(VALID)


def test_base_url_points_the_agent_at_an_openai_compatible_server(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "models"))
    from chat_server import ChatServer, completion

    args = '{"order": "B-7", "amount": 12, "reason": "late"}'
    call = {"id": "call_9", "name": "refund", "arguments": args}
    db = tmp_path / "served.db"
    with ChatServer() as server:
        server.script(
            completion("", tool_calls=[call], id="c-1"),
            completion("Refunded 12 euros on B-7.", id="c-2"),
        )
        where = ["--base-url", server.base_url, "--model", "served-model"]
        first = run(db, *where, "start")
        assert 'waiting for a person: refund {"order": "B-7", "amount": 12' in first
        out = run(db, *where, "resume", "approve")
        assert server.bodies[0]["model"] == "served-model"
        assert server.bodies[0]["messages"][0]["role"] == "system"
    assert "tool refund [success]: Refunded 12.00 EUR on order B-7 (late)." in out
    assert "assistant: Refunded 12 euros on B-7." in out and VALID in out
