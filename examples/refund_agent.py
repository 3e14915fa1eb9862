"""A support agent whose refunds wait for a person: approve, edit, answer or reject them.

Each command is its own process; the conversation lives in a SQLite file between them:

    python examples/refund_agent.py start                     # the agent asks to refund; waits
    python examples/refund_agent.py resume approve            # refund as asked
    python examples/refund_agent.py resume edit '{"amount": 5}'   # refund 5 instead
    python examples/refund_agent.py resume respond 'Send a photo of the parcel first.'
    python examples/refund_agent.py resume reject 'Outside the return window.'
    python examples/refund_agent.py show                      # the conversation, and is it valid?

A crash between the refund call and its result never leaves a history a provider refuses:

    python examples/refund_agent.py resume approve --crash-in-refund   # the process dies
    python examples/refund_agent.py continue        # runs what was left (the refund), or
    python examples/refund_agent.py say 'Never mind.'   # moves on: the call is answered
                                                        # "not executed" and says why

The model is scripted by default; ``--base-url http://localhost:11434/v1 --model llama3.1``
points it at any OpenAI-compatible server (Ollama, vLLM, llama.cpp, OpenAI).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from threadline import Command
from threadline.checkpoint import SqliteSaver
from threadline.models import ScriptedChatModel
from threadline.prebuilt import create_agent, validate_history

# THREADLINE_DEMO_DB lets the test suite run the demo on a file of its own.
DB = Path(
    os.environ.get("THREADLINE_DEMO_DB")
    or Path(__file__).resolve().parent.parent / ".demo" / "refund.db"
)
CONFIG = {"configurable": {"thread_id": "ticket-1042"}}
CUSTOMER = "Hi, my parcel for order A-1042 arrived broken. I paid 30 euros; can I get a refund?"
SYSTEM = (
    "You are a support agent. For refunds call the refund tool with the order id, the amount "
    "and a short reason; then tell the customer what happened."
)
SCRIPT: list[Any] = [
    {
        "content": "",
        "tool_calls": [
            {
                "name": "refund",
                "args": {"order": "A-1042", "amount": 30, "reason": "damaged parcel"},
            }
        ],
    },
    "Thank you for waiting. I have dealt with your refund request for order A-1042 as shown.",
]
FALLBACK = "Is there anything else I can help you with?"
CRASH_IN_REFUND = {"on": False}


def refund(order: str, amount: float, reason: str) -> str:
    """Refund ``amount`` euros on ``order`` (this is where the money moves)."""
    if CRASH_IN_REFUND["on"]:
        print("  (the process dies inside refund, before its result is saved)", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return f"Refunded {amount:.2f} EUR on order {order} ({reason})."


def order_status(order: str) -> str:
    """Where an order is."""
    return f"Order {order}: delivered, reported damaged."


def build(saver: SqliteSaver, args: argparse.Namespace) -> Any:
    return create_agent(
        chat_model(saver, args),
        [refund, order_status],
        system_prompt=SYSTEM,
        checkpointer=saver,
        review={"refund": ["accept", "edit", "respond", "reject"]},
    )


def chat_model(saver: SqliteSaver, args: argparse.Namespace) -> Any:
    """The scripted model, at the reply this thread has reached; or a real server's."""
    if args.base_url:
        from threadline.models import OpenAIChatModel

        return OpenAIChatModel(model=args.model, base_url=args.base_url, temperature=0)
    probe = create_agent(ScriptedChatModel([]), [], checkpointer=saver)
    said = sum(1 for m in messages_of(probe) if m.type == "ai")
    return ScriptedChatModel(SCRIPT[said:] + [FALLBACK] * 3)


def messages_of(agent: Any) -> list[Any]:
    return list(agent.get_state(CONFIG).values.get("messages", []))


# ---------------------------------------------------------------------- commands
def start(args: argparse.Namespace) -> None:
    DB.parent.mkdir(parents=True, exist_ok=True)
    for path in DB.parent.glob(DB.name + "*"):
        path.unlink()
    with SqliteSaver(DB) as saver:
        agent = build(saver, args)
        result = agent.invoke({"messages": [("user", CUSTOMER)]}, CONFIG)
        report(agent, result)


def resume(args: argparse.Namespace) -> None:
    CRASH_IN_REFUND["on"] = args.crash_in_refund
    with SqliteSaver(DB) as saver:
        agent = build(saver, args)
        decision = decision_of(args.decision, args.detail, agent)
        print(f"answering the review with {json.dumps(decision)}")
        result = agent.invoke(Command(resume={"decisions": [decision]}), CONFIG)
        report(agent, result)


def carry_on(args: argparse.Namespace) -> None:
    with SqliteSaver(DB) as saver:
        agent = build(saver, args)
        report(agent, agent.invoke(None, CONFIG))


def say(args: argparse.Namespace) -> None:
    with SqliteSaver(DB) as saver:
        agent = build(saver, args)
        report(agent, agent.invoke({"messages": [("user", args.text)]}, CONFIG))


def show(args: argparse.Namespace) -> None:
    with SqliteSaver(DB) as saver:
        agent = build(saver, args)
        report(agent, agent.get_state(CONFIG).values)


def decision_of(kind: str, detail: str | None, agent: Any) -> dict[str, Any]:
    """The decision the command line asks for; ``edit`` JSON changes some of the arguments."""
    if kind == "approve":
        return {"type": "accept"}
    if kind == "edit":
        (pending,) = agent.get_state(CONFIG).interrupts
        asked = pending.value["action_requests"][0]["args"]
        return {"type": "edit", "args": {**asked, **json.loads(detail or "{}")}}
    if kind == "respond":
        return {"type": "respond", "message": detail or ""}
    return {"type": "reject", "message": detail} if detail else {"type": "reject"}


def report(agent: Any, values: dict[str, Any]) -> None:
    messages = values.get("messages", [])
    for message in messages:
        print(f"  {line(message)}")
    state = agent.get_state(CONFIG)
    for pending in state.interrupts:
        for action in pending.value["action_requests"]:
            print(f"waiting for a person: {action['name']} {json.dumps(action['args'])}")
    if state.next and not state.interrupts:
        print(f"stopped before {', '.join(state.next)}: 'continue' runs it, 'say' moves on")
    problems = validate_history(messages)
    if problems:
        print("not sendable to a model yet:", "; ".join(str(p) for p in problems))
    else:
        print("history valid: every tool call has exactly one result")


def line(message: Any) -> str:
    if message.type == "ai" and message.tool_calls:
        calls = ", ".join(f"{c['name']}({json.dumps(c['args'])})" for c in message.tool_calls)
        return f"assistant asks for {calls}"
    if message.type == "tool":
        return f"tool {message.name} [{message.status}]: {message.content}"
    who = {"human": "customer", "ai": "assistant", "system": "system"}.get(message.type)
    return f"{who or message.type}: {message.content}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible server, e.g. .../v1")
    parser.add_argument("--model", default="gpt-4o-mini", help="the model name to ask for")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("start", help="a customer asks for a refund")
    answer = commands.add_parser("resume", help="decide on the pending refund")
    answer.add_argument("decision", choices=["approve", "edit", "respond", "reject"])
    answer.add_argument("detail", nargs="?", help="edit: JSON arguments; respond/reject: text")
    answer.add_argument("--crash-in-refund", action="store_true", help="die inside refund")
    commands.add_parser("continue", help="run what a crash left undone")
    talk = commands.add_parser("say", help="send the customer's next message")
    talk.add_argument("text")
    commands.add_parser("show", help="print the conversation")
    args = parser.parse_args(argv)
    run = {"start": start, "resume": resume, "continue": carry_on, "say": say, "show": show}
    run[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
