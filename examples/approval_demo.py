"""Customer-service refund approval: analyze -> human_review (interrupt) -> execute, on SQLite.

Run it in two processes to see a paused workflow survive between them:

    python examples/approval_demo.py start            # runs until a human must decide
    python examples/approval_demo.py resume approve   # a new process answers and finishes

``make demo`` does exactly that.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
from pathlib import Path
from typing import Annotated, TypedDict

from threadline import END, START, Command, StateGraph, interrupt
from threadline.checkpoint import SqliteSaver

# THREADLINE_DEMO_DB lets the test suite run the demo on a file of its own.
DB = Path(
    os.environ.get("THREADLINE_DEMO_DB")
    or Path(__file__).resolve().parent.parent / ".demo" / "approval.db"
)
CONFIG = {"configurable": {"thread_id": "ticket-1042"}}


class Ticket(TypedDict, total=False):
    customer: str
    request: str
    amount: float
    risk: str
    decision: str
    note: str
    outcome: str
    log: Annotated[list[str], operator.add]


def analyze(state: Ticket) -> dict:
    risk = "high" if state["amount"] > 100 else "low"
    return {"risk": risk, "log": [f"analyzed: refund of {state['amount']:.2f} is {risk} risk"]}


def human_review(state: Ticket) -> dict:
    answer = interrupt(
        {
            "question": "Approve this refund?",
            "customer": state["customer"],
            "amount": state["amount"],
            "risk": state["risk"],
            "options": ["approve", "reject"],
        }
    )
    return {
        "decision": answer["decision"],
        "note": answer.get("note", ""),
        "log": [f"reviewed: {answer['decision']}"],
    }


def execute(state: Ticket) -> dict:
    if state["decision"] == "approve":
        outcome = f"refunded {state['amount']:.2f} to {state['customer']}"
    else:
        outcome = f"refund for {state['customer']} declined"
    return {"outcome": outcome, "log": [f"executed: {outcome}"]}


def build(saver: SqliteSaver):
    graph = StateGraph(Ticket)
    graph.add_node("analyze", analyze)
    graph.add_node("human_review", human_review)
    graph.add_node("execute", execute)
    graph.add_edge(START, "analyze")
    graph.add_edge("analyze", "human_review")
    graph.add_edge("human_review", "execute")
    graph.add_edge("execute", END)
    return graph.compile(checkpointer=saver)


def start() -> None:
    DB.parent.mkdir(parents=True, exist_ok=True)
    DB.unlink(missing_ok=True)
    with SqliteSaver(DB) as saver:
        app = build(saver)
        ticket = {"customer": "Ada", "request": "damaged parcel", "amount": 249.0}
        result = app.invoke(ticket, CONFIG)
        print("process 1: the run stopped, waiting for a human")
        for item in result["__interrupt__"]:
            print("  pending request:", json.dumps(item.value))
            print("  interrupt id:   ", item.id)
        print("  next:", app.get_state(CONFIG).next)


def resume(decision: str) -> None:
    with SqliteSaver(DB) as saver:
        app = build(saver)
        pending = app.get_state(CONFIG)
        print(f"process 2: found thread waiting at {pending.next}; answering {decision!r}")
        final = app.invoke(Command(resume={"decision": decision, "note": "via demo"}), CONFIG)
        print("  outcome:", final["outcome"])
        print("  log:", *final["log"], sep="\n    ")
        history = list(app.get_state_history(CONFIG))
        print(f"  {len(history)} checkpoints on the thread, newest first:")
        for snap in history:
            meta = snap.metadata
            print(f"    step {meta['step']:>2} {meta['source']:<6} next={snap.next}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", choices=["start", "resume"])
    parser.add_argument("decision", nargs="?", default="approve", choices=["approve", "reject"])
    args = parser.parse_args()
    start() if args.command == "start" else resume(args.decision)


if __name__ == "__main__":
    main()
