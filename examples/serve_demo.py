"""The web page with one refund waiting for a person: ``make serve-demo``, then open
http://127.0.0.1:2024/ui/ (``--port`` picks another port).

A support graph asks a person to review each refund (``request_review``); the demo starts the
server, opens one ticket through the HTTP API so that it waits in the inbox, and serves until
Ctrl-C. Its data lives in ``.demo/serve.db``, started afresh each time.
"""

from __future__ import annotations

import argparse
import operator
import threading
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
import uvicorn

from threadline import END, START, StateGraph
from threadline.hitl import ActionRequest, request_review
from threadline.server.app import create_app
from threadline.server.settings import ServerSettings

HERE = Path(__file__).resolve().parent
DB = HERE.parent / ".demo" / "serve.db"
REFUND_ARGS = {
    "type": "object",
    "required": ["order", "amount"],
    "properties": {
        "order": {"type": "string"},
        "amount": {"type": "integer", "minimum": 0, "maximum": 500},
    },
}


class Ticket(TypedDict, total=False):
    order: str
    amount: int
    outcome: str
    log: Annotated[list[str], operator.add]


def propose(state: Ticket) -> dict[str, Any]:
    return {"log": [f"the customer asks for {state['amount']} back on {state['order']}"]}


def review(state: Ticket) -> dict[str, Any]:
    args = {"order": state["order"], "amount": state["amount"]}
    description = f"Refund {state['amount']} EUR for order {state['order']} (arrived broken)"
    action = ActionRequest("refund", args, description, args_schema=REFUND_ARGS)
    decision = request_review([action])[0]
    if decision.type in ("accept", "edit"):
        paid = (decision.args or args)["amount"]
        return {"outcome": f"refunded {paid}", "log": [f"refund of {paid} sent"]}
    return {"outcome": decision.type, "log": [f"no refund: {decision.message or decision.type}"]}


support = StateGraph(Ticket)
support.add_node("propose", propose)
support.add_node("review", review)
support.add_edge(START, "propose")
support.add_edge("propose", "review")
support.add_edge("review", END)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=2024)
    port = parser.parse_args().port
    DB.parent.mkdir(exist_ok=True)
    for old in DB.parent.glob(DB.name + "*"):
        old.unlink()
    settings = ServerSettings(
        graphs={"support": "serve_demo.py:support"}, base_dir=HERE, db=f"sqlite:///{DB}", port=port
    )
    server = uvicorn.Server(uvicorn.Config(create_app(settings), port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise SystemExit(f"the server did not start (is port {port} taken? try --port)")
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=url, timeout=30) as client:
        ticket = client.post("/threads", json={"metadata": {"customer": "ada"}}).json()
        client.post(
            f"/threads/{ticket['thread_id']}/runs/wait",
            json={"assistant_id": "support", "input": {"order": "A-1042", "amount": 30}},
        )
    print(f"One refund waits for approval: open {url}/ui/  (Ctrl-C stops the server)")
    try:
        thread.join()
    except KeyboardInterrupt:
        server.should_exit = True
        thread.join(timeout=10)


if __name__ == "__main__":
    main()
