"""An agent on SQLite whose tool can kill its own process, for the crash tests.

    python crash_agent.py DB start      # the model asks for refund; refund SIGKILLs the process
    python crash_agent.py DB start-two  # refund and audit in one turn; audit SIGKILLs the
                                        # process once refund has finished
    python crash_agent.py DB continue   # a fresh process continues: refund runs, the model ends
    python crash_agent.py DB say TEXT   # a fresh process sends new input instead

Each run prints the thread's messages as JSON lines: type, tool call ids, tool_call_id, status.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from threadline.checkpoint import SqliteSaver
from threadline.models import ScriptedChatModel
from threadline.prebuilt import create_react_agent

CONFIG = {"configurable": {"thread_id": "crash"}}
REFUND = {"name": "refund", "args": {"amount": 5}, "id": "call-1"}
AUDIT = {"name": "audit", "args": {}, "id": "call-2"}
SCRIPTS = {
    "start": [{"content": "", "tool_calls": [REFUND]}, "Refund handled."],
    "start-two": [{"content": "", "tool_calls": [REFUND, AUDIT]}, "Refund handled."],
}
LOG = os.environ.get("REFUND_LOG", "")  # each refund run appends a line here


def refund(amount: float) -> str:
    """Refund an amount."""
    if os.environ.get("CRASH_IN_TOOL") == "1" and not os.environ.get("CRASH_IN_AUDIT"):
        os.kill(os.getpid(), signal.SIGKILL)  # dies between the tool call and its result
    if LOG:
        with open(LOG, "a") as log:
            log.write(f"refund {amount}\n")
    return f"refunded {amount}"


def audit() -> str:
    """Audit the refund."""
    if os.environ.get("CRASH_IN_TOOL") == "1":
        while not (LOG and os.path.exists(LOG)):
            time.sleep(0.01)
        time.sleep(1.5)  # time for the refund's result to be saved (it is, as it returns)
        os.kill(os.getpid(), signal.SIGKILL)
    return "audited"


def main(db: str, command: str, *rest: str) -> None:
    with SqliteSaver(db) as saver:
        done = sum(1 for m in _messages(saver) if m.type == "ai")  # the script's replies used
        script = SCRIPTS[os.environ.get("SCRIPT", "start")][done:]
        agent = create_react_agent(ScriptedChatModel(script), [refund, audit], checkpointer=saver)
        if command.startswith("start"):
            agent.invoke({"messages": [("user", "refund me 5")]}, CONFIG)
        elif command == "continue":
            agent.invoke(None, CONFIG)
        elif command == "say":
            agent.invoke({"messages": [("user", rest[0])]}, CONFIG)
        state = agent.get_state(CONFIG)
        print(json.dumps({"next": list(state.next)}))
        for m in state.values["messages"]:
            print(json.dumps(_shown(m)))


def _messages(saver: SqliteSaver) -> list:
    probe = create_react_agent(ScriptedChatModel([]), [], checkpointer=saver)
    return list(probe.get_state(CONFIG).values.get("messages", []))


def _shown(m: object) -> dict:
    return {
        "type": m.type,
        "calls": [c["id"] for c in getattr(m, "tool_calls", [])],
        "answers": getattr(m, "tool_call_id", None),
        "status": getattr(m, "status", None),
        "content": m.content,
    }


if __name__ == "__main__":
    main(*sys.argv[1:])
