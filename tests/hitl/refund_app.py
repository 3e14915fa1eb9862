"""A reviewed refund on SQLite, one step per process: ``refund_app.py DB LEDGER start`` or
``refund_app.py DB LEDGER resume ANSWER_JSON``. Used by ``test_another_process.py``.

The refund tool appends a line to LEDGER each time its body runs, so the test can count.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pydantic
import typing_extensions

from threadline import END, START, Command, StateGraph, interrupt
from threadline.checkpoint import SqliteSaver
from threadline.errors import InvalidAnswerError
from threadline.hitl import human_review


class Confirmation(pydantic.BaseModel):
    confirmed: bool
    by: str


class State(typing_extensions.TypedDict, total=False):
    order: str
    amount: float
    result: str
    confirmed_by: str


def build(saver: SqliteSaver, ledger: str) -> Any:
    def refund(order: str, amount: float) -> str:
        """Refund part of an order."""
        with open(ledger, "a") as out:
            out.write(f"{order} {amount}\n")
        return f"refunded {amount} on {order}"

    reviewed = human_review(refund, description="Refunds move real money")

    def pay(state: State) -> dict[str, Any]:
        result = reviewed(order=state["order"], amount=state["amount"])
        confirmation = interrupt({"result": result}, schema=Confirmation)
        return {"result": result, "confirmed_by": confirmation.by}

    g = StateGraph(State)
    g.add_node("pay", pay)
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    return g.compile(checkpointer=saver)


def main(db: str, ledger: str, command: str, answer: str = "") -> int:
    config = {"configurable": {"thread_id": "refund-1"}}
    with SqliteSaver(db) as saver:
        graph = build(saver, ledger)
        run_input = {"order": "A1", "amount": 30} if command == "start" else None
        if command == "resume":
            run_input = Command(resume=json.loads(answer))
        try:
            out = graph.invoke(run_input, config)
        except InvalidAnswerError as exc:
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        asked = [{"value": i.value, "schema": i.schema} for i in out.pop("__interrupt__", ())]
        print(json.dumps({"state": out, "asked": asked}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
