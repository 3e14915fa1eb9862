"""Static breakpoints, dynamic interrupt(), resume with Command, several interrupts at once."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

from threadline import END, START, Command, Interrupt, RetryPolicy, Send, StateGraph, interrupt
from threadline.checkpoint import InMemorySaver
from threadline.errors import (
    CheckpointerRequiredError,
    InvalidResumeError,
    NothingToResumeError,
)


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    answer: str


def cfg(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


def counted(name: str, calls: list[str]):
    def node(state: State) -> dict:
        calls.append(name)
        return {"items": [name]}

    return node


def three_steps(saver, **compile_kw):
    calls: list[str] = []
    g = StateGraph(State)
    for name in ("a", "b", "c"):
        g.add_node(name, counted(name, calls))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g.compile(checkpointer=saver, **compile_kw), calls


def test_interrupt_before_pauses_and_none_continues(saver):
    graph, calls = three_steps(saver, interrupt_before=["b"])
    out = graph.invoke({"items": []}, cfg())
    assert out == {"items": ["a"]}
    snap = graph.get_state(cfg())
    assert snap.next == ("b",) and snap.interrupts == ()
    assert graph.invoke(None, cfg()) == {"items": ["a", "b", "c"]}
    assert calls == ["a", "b", "c"]


def test_interrupt_after_pauses_after_the_node(saver):
    graph, calls = three_steps(saver, interrupt_after=["a"])
    graph.invoke({"items": []}, cfg())
    assert graph.get_state(cfg()).next == ("b",)
    graph.invoke(None, cfg())
    assert calls == ["a", "b", "c"]


def test_breakpoints_per_call_are_not_remembered(saver):
    graph, calls = three_steps(saver)
    graph.invoke({"items": []}, cfg(), interrupt_before=["c"])
    assert graph.get_state(cfg()).next == ("c",)
    assert graph.invoke(None, cfg())["items"] == ["a", "b", "c"]
    calls.clear()
    assert graph.invoke({"items": []}, cfg("t2"))["items"] == ["a", "b", "c"]


def test_breakpoint_stream_shows_empty_interrupt(saver):
    graph, _ = three_steps(saver, interrupt_before=["b"])
    chunks = list(graph.stream({"items": []}, cfg()))
    assert chunks == [{"a": {"items": ["a"]}}, {"__interrupt__": ()}]


def approval_graph(saver):
    runs: list[str] = []

    def ask(state: State) -> dict:
        runs.append("ask")
        first = interrupt("first?")
        second = interrupt("second?")
        return {"answer": f"{first}+{second}"}

    g = StateGraph(State)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver), runs


def test_dynamic_interrupt_resume_gets_the_nth_answer(saver):
    graph, runs = approval_graph(saver)
    out = graph.invoke({"items": []}, cfg())
    [first] = out["__interrupt__"]
    assert isinstance(first, Interrupt) and first.value == "first?"
    snap = graph.get_state(cfg())
    assert snap.next == ("ask",)
    assert snap.interrupts == (first,)
    assert snap.tasks[0].interrupts == (first,)
    out = graph.invoke(Command(resume="one"), cfg())
    [second] = out["__interrupt__"]
    assert second.value == "second?" and second.id != first.id
    out = graph.invoke(Command(resume="two"), cfg())
    assert out == {"items": [], "answer": "one+two"}
    assert runs == ["ask"] * 3
    assert graph.get_state(cfg()).interrupts == ()


def test_interrupt_ids_are_stable_across_reruns(saver):
    graph, _ = approval_graph(saver)
    first = graph.invoke({"items": []}, cfg())["__interrupt__"][0]
    again = graph.invoke(None, cfg())["__interrupt__"][0]  # re-runs, asks the same question
    assert again == first


def test_interrupt_without_checkpointer_fails_at_once():
    graph, _ = approval_graph(None)
    with pytest.raises(CheckpointerRequiredError, match="ask"):
        graph.invoke({"items": []})


def test_resume_on_unknown_thread_runs_nothing(saver):
    graph, runs = approval_graph(saver)
    with pytest.raises(NothingToResumeError, match="typo"):
        graph.invoke(Command(resume="x"), cfg("typo"))
    assert runs == []
    assert list(graph.get_state_history(cfg("typo"))) == []


def test_resume_none_and_not_interrupted_are_clear_errors(saver):
    graph, _ = approval_graph(saver)
    graph.invoke({"items": []}, cfg())
    with pytest.raises(InvalidResumeError):
        graph.invoke(Command(resume=None), cfg())
    graph.invoke(Command(resume="1"), cfg())
    graph.invoke(Command(resume="2"), cfg())
    with pytest.raises(NothingToResumeError):
        graph.invoke(Command(resume="3"), cfg())


def test_resume_after_update_state_answers_the_rerun_interrupt(saver):
    """update_state makes a new checkpoint: the interrupt it replaced no longer waits, but the
    node runs again and its interrupt() takes the resume value (LangGraph does the same)."""
    graph, runs = approval_graph(saver)
    graph.invoke({"items": []}, cfg())
    graph.update_state(cfg(), {"items": ["edited"]})
    assert graph.get_state(cfg()).interrupts == ()
    out = graph.invoke(Command(resume="one"), cfg())
    assert out["__interrupt__"][0].value == "second?"  # "first?" took the value
    out = graph.invoke(Command(resume="two"), cfg())
    assert out == {"items": ["edited"], "answer": "one+two"}
    assert runs == ["ask"] * 3


def test_resume_at_a_static_breakpoint_goes_on(saver):
    graph, calls = three_steps(saver, interrupt_before=["b"])
    graph.invoke({"items": []}, cfg())
    assert graph.invoke(Command(resume="ignored"), cfg())["items"] == ["a", "b", "c"]
    assert calls == ["a", "b", "c"]


def test_a_retried_node_gets_the_spare_answer_again(saver):
    attempts: list[str] = []

    def ask(state: State) -> dict:
        answer = interrupt("ok?")
        attempts.append(answer)
        if len(attempts) == 1:
            raise ConnectionError("flaky")
        return {"answer": answer}

    g = StateGraph(State)
    g.add_node("ask", ask, retry_policy=RetryPolicy(max_attempts=2, initial_interval=0))
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    graph = g.compile(checkpointer=saver)
    graph.invoke({"items": []}, cfg())
    graph.update_state(cfg(), {"items": ["x"]})
    assert graph.invoke(Command(resume="yes"), cfg())["answer"] == "yes"
    assert attempts == ["yes", "yes"]


def test_a_spare_answer_reaches_an_interrupt_inside_a_subgraph(saver):
    def inner_ask(state: State) -> dict:
        return {"answer": interrupt("inner?")}

    child = StateGraph(State)
    child.add_node("inner_ask", inner_ask)
    child.add_edge(START, "inner_ask")
    child.add_edge("inner_ask", END)
    parent = StateGraph(State)
    parent.add_node("child", child.compile())
    parent.add_edge(START, "child")
    parent.add_edge("child", END)
    graph = parent.compile(checkpointer=saver, interrupt_before=["child"])
    graph.invoke({"items": []}, cfg())
    assert graph.get_state(cfg()).next == ("child",)
    # Nothing waits yet: the value goes to the first interrupt() the step calls, nested or not.
    assert graph.invoke(Command(resume="yes"), cfg())["answer"] == "yes"


def test_new_input_abandons_a_pending_interrupt(saver):
    graph, _ = approval_graph(saver)
    graph.invoke({"items": []}, cfg())
    out = graph.invoke({"items": ["new"]}, cfg())
    assert out["__interrupt__"][0].value == "first?"
    assert out["items"] == ["new"]


def fan_out_graph(saver):
    def review(state: dict) -> dict:
        verdict = interrupt(f"approve {state['item']}?")
        return {"items": [f"{state['item']}:{verdict}"]}

    g = StateGraph(State)
    g.add_node("review", review)
    g.add_conditional_edges(START, lambda s: [Send("review", {"item": i}) for i in ("x", "y")])
    g.add_edge("review", END)
    return g.compile(checkpointer=saver)


def test_several_interrupts_need_a_map_of_answers(saver):
    graph = fan_out_graph(saver)
    out = graph.invoke({"items": []}, cfg())
    pending = out["__interrupt__"]
    assert sorted(i.value for i in pending) == ["approve x?", "approve y?"]
    with pytest.raises(InvalidResumeError, match="2 interrupts"):
        graph.invoke(Command(resume="yes"), cfg())
    assert len(graph.get_state(cfg()).interrupts) == 2
    by_value = {i.value: i.id for i in pending}
    out = graph.invoke(Command(resume={by_value["approve x?"]: "ok"}), cfg())
    assert [i.id for i in out["__interrupt__"]] == [by_value["approve y?"]]
    out = graph.invoke(Command(resume={by_value["approve y?"]: "no"}), cfg())
    assert sorted(out["items"]) == ["x:ok", "y:no"]


def test_interrupt_inside_a_subgraph_surfaces_on_the_parent(saver):
    inner_runs: list[str] = []

    def inner_ask(state: State) -> dict:
        inner_runs.append("ask")
        return {"answer": interrupt("inner?")}

    child = StateGraph(State)
    child.add_node("prep", lambda s: {"items": ["prep"]})
    child.add_node("inner_ask", inner_ask)
    child.add_edge(START, "prep")
    child.add_edge("prep", "inner_ask")
    child.add_edge("inner_ask", END)

    parent = StateGraph(State)
    parent.add_node("child", child.compile())
    parent.add_node("after", lambda s: {"items": ["after"]})
    parent.add_edge(START, "child")
    parent.add_edge("child", "after")
    parent.add_edge("after", END)
    graph = parent.compile(checkpointer=saver)

    out = graph.invoke({"items": ["start"]}, cfg())
    assert out["__interrupt__"][0].value == "inner?"
    snap = graph.get_state(cfg())
    assert snap.next == ("child",)
    assert [i.value for i in snap.interrupts] == ["inner?"]
    assert snap.tasks[0].state is None  # subgraph state only when asked for

    inner = graph.get_state(cfg(), subgraphs=True).tasks[0].state
    assert inner.values == {"items": ["start", "prep"]}
    assert inner.next == ("inner_ask",)
    assert [i.value for i in inner.tasks[0].interrupts] == ["inner?"]

    out = graph.invoke(Command(resume="yes"), cfg())
    assert out == {"items": ["start", "prep", "after"], "answer": "yes"}
    assert inner_runs == ["ask", "ask"]
    assert graph.get_state(cfg(), subgraphs=True).tasks == ()


def test_in_memory_interrupt_and_resume_same_process():
    graph, _ = approval_graph(InMemorySaver())
    graph.invoke({}, cfg())
    graph.invoke(Command(resume="a"), cfg())
    assert graph.invoke(Command(resume="b"), cfg())["answer"] == "a+b"


async def test_aget_state_with_subgraphs_shows_the_interrupted_subgraph(saver):
    def ask(state: State) -> dict:
        return {"answer": interrupt("deep?")}

    grand = StateGraph(State)
    grand.add_node("ask", ask)
    grand.add_edge(START, "ask")
    grand.add_edge("ask", END)
    child = StateGraph(State)
    child.add_node("grand", grand.compile())
    child.add_edge(START, "grand")
    child.add_edge("grand", END)
    parent = StateGraph(State)
    parent.add_node("child", child.compile())
    parent.add_edge(START, "child")
    parent.add_edge("child", END)
    graph = parent.compile(checkpointer=saver)

    await graph.ainvoke({"items": []}, cfg())
    snap = await graph.aget_state(cfg(), subgraphs=True)
    deepest = snap.tasks[0].state.tasks[0].state
    assert deepest.next == ("ask",)
    assert [i.value for i in deepest.tasks[0].interrupts] == ["deep?"]
