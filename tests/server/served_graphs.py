"""Graphs the server tests serve (named in the settings as ``served_graphs.py:<name>``)."""

from __future__ import annotations

import asyncio
import operator
import time
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from threadline import (
    END,
    START,
    CompiledStateGraph,
    Runtime,
    StateGraph,
    get_store,
    get_stream_writer,
    interrupt,
)
from threadline.graph import MessagesState
from threadline.models import ScriptedChatModel


class Ticket(TypedDict, total=False):
    request: str
    decision: str
    log: Annotated[list[str], operator.add]


def review(state: Ticket) -> dict[str, Any]:
    answer = interrupt({"question": f"approve {state['request']}?"})
    return {"decision": answer, "log": [f"reviewed: {answer}"]}


def act(state: Ticket) -> dict[str, Any]:
    get_stream_writer()({"acting_on": state["decision"]})
    return {"log": [f"acted: {state['decision']}"]}


approval = StateGraph(Ticket)
approval.add_node("review", review)
approval.add_node("act", act)
approval.add_edge(START, "review")
approval.add_edge("review", "act")
approval.add_edge("act", END)


class Counter(TypedDict, total=False):
    n: int
    delay: float
    steps: Annotated[list[int], operator.add]


async def tick(state: Counter) -> dict[str, Any]:
    await asyncio.sleep(state.get("delay", 0.0))
    return {"n": state.get("n", 0) + 1, "steps": [state.get("n", 0) + 1]}


def route(state: Counter) -> str:
    return "tick" if state.get("n", 0) < 3 else END


counter = StateGraph(Counter)
counter.add_node("tick", tick)
counter.add_edge(START, "tick")
counter.add_conditional_edges("tick", route, ["tick", END])


def explode(state: Counter) -> dict[str, Any]:
    raise ValueError("the node failed on purpose")


failing = StateGraph(Counter)
failing.add_node("explode", explode)
failing.add_edge(START, "explode")
failing.add_edge("explode", END)


def slow_sync(state: Counter) -> dict[str, Any]:
    time.sleep(state.get("delay", 0.0))
    return {"n": state.get("n", 0) + 1}


blocking = StateGraph(Counter)
blocking.add_node("slow", slow_sync)
blocking.add_edge(START, "slow")
blocking.add_edge("slow", END)


class Order(TypedDict, total=False):
    item: str
    quantity: int


def ask_quantity(state: Order) -> dict[str, Any]:
    schema = {
        "type": "object",
        "required": ["quantity"],
        "properties": {"quantity": {"type": "integer", "minimum": 1}},
        "additionalProperties": False,
    }
    answer = interrupt({"question": f"how many {state['item']}?"}, schema=schema)
    return {"quantity": answer["quantity"]}


typed = StateGraph(Order)
typed.add_node("ask", ask_quantity)
typed.add_edge(START, "ask")
typed.add_edge("ask", END)


# ---------------------------------------------------------------- audited (scale-out tests)
# Each step writes (thread, label, pid, start, end) to a PostgreSQL table named by the
# environment: the scale-out tests count these to prove each step ran once, in one process.
AUDIT_DB = "THREADLINE_TEST_AUDIT_DB"
AUDIT_TABLE = "THREADLINE_TEST_AUDIT_TABLE"


class Audit(TypedDict, total=False):
    n: int
    delay: float
    ask: bool
    answer: str


def _audited(config: Any, label: str, delay: float) -> None:
    """Record the step's start, sleep ``delay``, record its end (side effects of a step)."""
    import os

    import psycopg

    thread_id = config["configurable"]["thread_id"]
    table = os.environ[AUDIT_TABLE]
    with psycopg.connect(os.environ[AUDIT_DB], autocommit=True) as conn:
        row = conn.execute(
            f"INSERT INTO {table} (thread_id, label, pid, started) "
            "VALUES (%s, %s, %s, clock_timestamp()) RETURNING id",
            (thread_id, label, os.getpid()),
        ).fetchone()
        time.sleep(delay)
        assert row is not None
        conn.execute(f"UPDATE {table} SET ended = clock_timestamp() WHERE id = %s", (row[0],))


def work(state: Audit, config: Any) -> dict[str, Any]:
    n = state.get("n", 0) + 1
    _audited(config, f"work{n}", state.get("delay", 0.0))
    return {"n": n}


def ask(state: Audit, config: Any) -> dict[str, Any]:
    answer = interrupt("go on?")
    _audited(config, "ask", 0.0)
    return {"answer": answer}


def after_work(state: Audit) -> str:
    if state.get("n", 0) < 3:
        return "work"
    return "ask" if state.get("ask") and not state.get("answer") else END


audited = StateGraph(Audit)
audited.add_node("work", work)
audited.add_node("ask", ask)
audited.add_edge(START, "work")
audited.add_conditional_edges("work", after_work, ["work", "ask", END])
audited.add_edge("ask", END)


# ---------------------------------------------------------------- a chat model's tokens
def chatbot(state: MessagesState) -> dict[str, Any]:
    heard = state["messages"][-1].content
    model = ScriptedChatModel([f"you said {heard}"])
    return {"messages": [model.invoke(state["messages"])]}


chat = StateGraph(MessagesState)
chat.add_node("chatbot", chatbot)
chat.add_edge(START, "chatbot")
chat.add_edge("chatbot", END)


# ---------------------------------------------------------------- a subgraph
class Outer(TypedDict, total=False):
    topic: str
    ask: bool
    notes: Annotated[list[str], operator.add]


def research(state: Outer) -> dict[str, Any]:
    get_stream_writer()({"researching": state["topic"]})
    if state.get("ask"):
        interrupt({"check": state["topic"]})
    return {"notes": [f"found {state['topic']}"]}


def summarise(state: Outer) -> dict[str, Any]:
    return {"notes": [f"summary of {len(state['notes'])}"]}


def _inner() -> CompiledStateGraph:
    """The subgraph (built here: every StateGraph at module level is served)."""
    inner = StateGraph(Outer)
    inner.add_node("research", research)
    inner.add_node("summarise", summarise)
    inner.add_edge(START, "research")
    inner.add_edge("research", "summarise")
    inner.add_edge("summarise", END)
    return inner.compile()


def plan(state: Outer) -> dict[str, Any]:
    return {"notes": [f"plan {state['topic']}"]}


nested = StateGraph(Outer)
nested.add_node("plan", plan)
nested.add_node("inner", _inner())
nested.add_edge(START, "plan")
nested.add_edge("plan", "inner")
nested.add_edge("inner", END)


# ---------------------------------------------------------------- a run's context
@dataclass
class Tone:
    greeting: str = "hello"


class Greeted(TypedDict, total=False):
    name: str
    text: str


def greet(state: Greeted, runtime: Runtime[Tone]) -> dict[str, Any]:
    tone = runtime.context or Tone()  # no context given: the defaults
    return {"text": f"{tone.greeting} {state['name']}"}


greeter = StateGraph(Greeted, context_schema=Tone)
greeter.add_node("greet", greet)
greeter.add_edge(START, "greet")
greeter.add_edge("greet", END)


# ---------------------------------------------------------------- the store
class Memo(TypedDict, total=False):
    who: str
    text: str


def remember(state: Memo) -> dict[str, Any]:
    get_store().put(("memos", state["who"]), "last", {"text": state["text"]})
    return {}


memo = StateGraph(Memo)
memo.add_node("remember", remember)
memo.add_edge(START, "remember")
memo.add_edge("remember", END)
