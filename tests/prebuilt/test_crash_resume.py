"""A process killed (SIGKILL) between the model's tool call and the tool's result: the thread,
resumed by a fresh process, always ends with a history a provider accepts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from threadline.checkpoint import SqliteSaver
from threadline.models import ScriptedChatModel
from threadline.prebuilt import create_react_agent, validate_history

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
CONFIG = {"configurable": {"thread_id": "crash"}}

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")


def run(
    db: Path, *args: str, crash: bool = False, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CRASH_IN_TOOL": "1" if crash else "0", **extra}
    return subprocess.run(
        [sys.executable, str(HERE / "crash_agent.py"), str(db), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def messages_in(db: Path) -> tuple[list, tuple[str, ...]]:
    with SqliteSaver(db) as saver:
        agent = create_react_agent(ScriptedChatModel([]), [], checkpointer=saver)
        state = agent.get_state(CONFIG)
        return list(state.values["messages"]), state.next


@pytest.fixture
def crashed(tmp_path: Path) -> Path:
    db = tmp_path / "agent.db"
    killed = run(db, "start", crash=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    messages, next_nodes = messages_in(db)
    assert [m.type for m in messages] == ["human", "ai"]  # the call was saved, its result not
    assert next_nodes == ("tools",)
    assert [p.kind for p in validate_history(messages)] == ["missing_result"]
    return db


def test_continuing_in_a_fresh_process_runs_the_tool_once_more(crashed: Path) -> None:
    done = run(crashed, "continue")
    assert done.returncode == 0, done.stderr
    messages, next_nodes = messages_in(crashed)
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[2].content == "refunded 5.0" and next_nodes == ()
    assert validate_history(messages) == []


def test_new_input_in_a_fresh_process_answers_the_call_as_not_executed(crashed: Path) -> None:
    done = run(crashed, "say", "forget it")
    assert done.returncode == 0, done.stderr
    messages, _ = messages_in(crashed)
    assert [m.type for m in messages] == ["human", "ai", "tool", "human", "ai"]
    filler = messages[2]
    assert filler.tool_call_id == "call-1" and filler.status == "error"
    assert "was not executed" in filler.content and "process died" in filler.content
    assert validate_history(messages) == []


def test_a_call_that_finished_before_the_crash_does_not_run_again(tmp_path: Path) -> None:
    db, log = tmp_path / "agent.db", tmp_path / "refunds.log"
    extra = {"SCRIPT": "start-two", "REFUND_LOG": str(log), "CRASH_IN_AUDIT": "1"}
    killed = run(db, "start", crash=True, **extra)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert log.read_text() == "refund 5.0\n"
    done = run(db, "continue", **extra)
    assert done.returncode == 0, done.stderr
    assert log.read_text() == "refund 5.0\n"  # audit ran again; the refund did not
    messages, _ = messages_in(db)
    assert [m.content for m in messages if m.type == "tool"] == ["refunded 5.0", "audited"]
    assert validate_history(messages) == []
