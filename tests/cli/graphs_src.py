"""The graph file the CLI tests write to their tmp_path and load with --graph FILE:attr."""

SOURCE = """
from typing import Annotated, TypedDict
import operator

from threadline import END, START, StateGraph, interrupt
from threadline.hitl import ActionRequest, request_review


class State(TypedDict, total=False):
    topic: str
    answer: str
    decision: str
    notes: Annotated[list, operator.add]


def ask(state):
    return {"answer": interrupt({"question": "ok " + state["topic"] + "?"})}


def finish(state):
    return {"answer": state["answer"] + "!"}


approval = StateGraph(State)
approval.add_node("ask", ask)
approval.add_node("finish", finish)
approval.add_edge(START, "ask")
approval.add_edge("ask", "finish")
approval.add_edge("finish", END)


def review(state):
    [decision] = request_review([ActionRequest("pay", {"amount": 5})])
    return {"decision": decision.type + ":" + (decision.message or "")}


reviewed = StateGraph(State)
reviewed.add_node("review", review)
reviewed.add_edge(START, "review")
reviewed.add_edge("review", END)


def left(state):
    return {"notes": ["left " + str(interrupt("left?"))]}


def right(state):
    return {"notes": ["right " + str(interrupt("right?"))]}


two = StateGraph(State)
two.add_node("left", left)
two.add_node("right", right)
two.add_edge(START, "left")
two.add_edge(START, "right")
two.add_edge("left", END)
two.add_edge("right", END)


def inbox_review(state):
    asked = {"action": "pay", "args": {"amount": 5}}
    switches = {"allow_accept": True, "allow_edit": False, "allow_respond": True,
                "allow_ignore": True}
    [response] = interrupt([{"action_request": asked, "config": switches, "description": None}])
    return {"decision": "inbox:" + response["type"]}


inbox = StateGraph(State)
inbox.add_node("review", inbox_review)
inbox.add_edge(START, "review")
inbox.add_edge("review", END)


def remember(state, *, store):
    answer = interrupt("what should I remember?")
    store.put(("notes",), "last", {"text": answer})
    return {"answer": store.get(("notes",), "last").value["text"]}


memory = StateGraph(State)
memory.add_node("remember", remember)
memory.add_edge(START, "remember")
memory.add_edge("remember", END)
"""
