"""Programs written for LangGraph get its exception types and its messages."""

from __future__ import annotations

import asyncio

import pytest
from langgraph_graphs import (
    Log,
    cfg,
    single,
)

from threadline import START, Command, Send, StateGraph, interrupt
from threadline.checkpoint import InMemorySaver
from threadline.errors import (
    AmbiguousResumeError,
    AsyncNodeInSyncRunError,
    CheckpointerRequiredError,
    GraphRecursionError,
    GraphValidationError,
    ThreadIdRequiredError,
)


# ------------------------------------------------------------------ exception types
def test_sync_invoke_of_an_async_node_is_a_type_error_as_in_langgraph():
    async def fetch(state: Log) -> dict:
        return {"log": ["fetched"]}

    graph = single("fetch", fetch)
    with pytest.raises(TypeError, match="'fetch' is async; run this graph with ainvoke"):
        graph.invoke({"log": []})
    with pytest.raises(AsyncNodeInSyncRunError):
        list(graph.stream({"log": []}))
    assert issubclass(AsyncNodeInSyncRunError, GraphValidationError)
    assert asyncio.run(graph.ainvoke({"log": []})) == {"log": ["fetched"]}


def test_a_bare_resume_with_several_interrupts_waiting_is_a_runtime_error():
    def fan_out(state: Log) -> list[Send]:
        return [Send("ask", {"log": [doc]}) for doc in ("a", "b")]

    def ask(state: Log) -> dict:
        return {"log": [interrupt(f"ok {state['log'][0]}?")]}

    builder = StateGraph(Log)
    builder.add_node("ask", ask)
    builder.add_conditional_edges(START, fan_out, ["ask"])
    graph = builder.compile(checkpointer=InMemorySaver())
    graph.invoke({"log": []}, cfg())

    with pytest.raises(RuntimeError, match="2 interrupts are waiting") as caught:
        graph.invoke(Command(resume="yes"), cfg())
    assert isinstance(caught.value, AmbiguousResumeError)  # an InvalidResumeError too
    assert len(graph.get_state(cfg()).interrupts) == 2  # nothing was resumed

    answers = {i.id: i.value for i in graph.get_state(cfg()).interrupts}
    assert sorted(graph.invoke(Command(resume=answers), cfg())["log"]) == ["ok a?", "ok b?"]


def test_a_checkpointer_without_a_thread_id_is_a_value_error():
    graph = single("a", lambda s: {"log": ["a"]}, checkpointer=InMemorySaver())
    with pytest.raises(ValueError, match="needs a thread id") as caught:
        graph.invoke({"log": []})
    assert isinstance(caught.value, ThreadIdRequiredError)  # a ConfigError too
    with pytest.raises(ValueError):
        graph.get_state({"configurable": {}})


def test_build_and_config_errors_are_value_errors_as_in_langgraph():
    builder = StateGraph(Log)
    builder.add_node("a", lambda s: {"log": ["a"]})
    with pytest.raises(ValueError, match="already in the graph"):
        builder.add_node("a", lambda s: {})
    builder.add_edge("a", "nowhere")
    with pytest.raises(ValueError) as caught:
        builder.compile()
    assert isinstance(caught.value, GraphValidationError)

    graph = single("a", lambda s: {"log": ["a"]})
    with pytest.raises(ValueError, match="no checkpointer") as caught:
        graph.get_state(cfg())
    assert isinstance(caught.value, CheckpointerRequiredError)
    with pytest.raises(ValueError, match="recursion_limit"):
        graph.invoke({"log": []}, {"recursion_limit": 0})
    with pytest.raises(RuntimeError, match="needs a graph with a checkpointer") as caught:
        graph.invoke(Command(resume="yes"))
    assert isinstance(caught.value, CheckpointerRequiredError)


def test_the_recursion_limit_says_what_langgraph_says_and_is_a_recursion_error():
    graph = StateGraph(Log)
    graph.add_node("tick", lambda s: {"log": ["t"]})
    graph.add_edge(START, "tick")
    graph.add_conditional_edges("tick", lambda s: "tick")
    graph = graph.compile(checkpointer=InMemorySaver())

    with pytest.raises(RecursionError) as caught:
        graph.invoke({"log": []}, cfg(recursion_limit=3))
    assert isinstance(caught.value, GraphRecursionError)
    message = str(caught.value)
    assert message.startswith("Recursion limit of 3 reached without hitting a stop condition")
    assert "'t'" in message and "tick" in message  # names the thread and the next node
    assert graph.get_state(cfg()).next == ("tick",)
