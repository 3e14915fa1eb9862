"""Managed values (remaining steps, is-last-step) as LangGraph computes them, and chunks
filtered to the output schema.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, TypedDict

import pytest
from langgraph_graphs import (
    Question,
    cfg,
    single,
)

from threadline import START, Command, StateGraph, interrupt
from threadline.checkpoint import InMemorySaver
from threadline.errors import (
    GraphRecursionError,
)
from threadline.managed import IsLastStep, RemainingSteps


# ------------------------------------------------------------------ managed values
class Steps(TypedDict):
    log: Annotated[list[str], operator.add]
    remaining_steps: RemainingSteps
    is_last_step: IsLastStep


def counting(saver=None, ask_in: str = ""):
    def make(name: str):
        def node(state: Steps) -> dict:
            if name == ask_in:
                interrupt("go on?")
            return {"log": [f"{name}:{state['remaining_steps']}:{state['is_last_step']}"]}

        return node

    builder = StateGraph(Steps)
    builder.add_sequence([(n, make(n)) for n in "abc"])
    builder.add_edge(START, "a")
    return builder.compile(checkpointer=saver)


def test_remaining_steps_counts_down_to_the_recursion_limit_as_in_langgraph():
    graph = counting()
    out = graph.invoke({"log": []}, {"recursion_limit": 10})
    assert out == {"log": ["a:9:False", "b:8:False", "c:7:False"]}  # never in the output
    # the input and START steps count: with a limit of 4, "c" is the last step
    assert graph.invoke({"log": []}, {"recursion_limit": 4})["log"][-1] == "c:1:True"
    with pytest.raises(GraphRecursionError):
        graph.invoke({"log": []}, {"recursion_limit": 2})


def test_a_resumed_run_counts_from_the_checkpoint_it_starts_at():
    graph = counting(InMemorySaver(), ask_in="b")
    graph.invoke({"log": []}, cfg(recursion_limit=10))
    assert graph.get_state(cfg()).values == {"log": ["a:9:False"]}  # not saved, not shown
    out = graph.invoke(Command(resume=True), cfg(recursion_limit=5))
    assert out["log"] == ["a:9:False", "b:6:False", "c:5:False"]


def test_a_resumed_run_may_take_the_steps_langgraph_allows_it():
    """LangGraph counts a resumed run's limit from the checkpoint it starts at, so such a run
    may take more steps than one given input (which spends two on its input and START)."""
    graph = counting(InMemorySaver(), ask_in="a")
    graph.invoke({"log": []}, cfg())  # stops in "a", the first step
    out = graph.invoke(Command(resume=True), cfg(recursion_limit=2))  # a, b, c: three steps
    assert out["log"] == ["a:3:False", "b:2:False", "c:1:True"]


def test_a_managed_key_is_computed_not_written():
    def echo(state: Steps) -> dict:
        return {**state, "log": ["echo"]}  # hands back what it got, remaining_steps too

    graph = single("echo", echo, schema=Steps)
    assert graph.invoke({"log": [], "remaining_steps": 99}) == {"log": ["echo"]}
    from threadline.managed.is_last_step import RemainingSteps as FromLangGraphPath

    assert FromLangGraphPath is RemainingSteps


@dataclass
class DataSteps:
    log: Annotated[list[str], operator.add] = field(default_factory=list)
    remaining_steps: RemainingSteps = 0


def test_a_dataclass_state_gets_managed_values_too():
    def node(state: DataSteps) -> dict:
        return {"log": [f"left {state.remaining_steps}"]}

    graph = single("node", node, schema=DataSteps)
    assert graph.invoke(DataSteps(), {"recursion_limit": 5}) == {"log": ["left 4"]}


class Findings(TypedDict):
    findings: str


class Research(Question, Findings):
    notes: str


def research_graph():
    def gather(state: Question) -> dict:
        return {"notes": f"notes on {state['question']}"}

    def conclude(state: Research) -> dict:
        return {"findings": state["notes"].upper()}

    builder = StateGraph(Research, input_schema=Question, output_schema=Findings)
    builder.add_sequence([("gather", gather), ("conclude", conclude)])
    builder.add_edge(START, "gather")
    return builder.compile()


def test_an_invoked_run_shows_only_its_output_keys_in_its_chunks():
    graph = research_graph()
    assert graph.invoke({"question": "owls"}, stream_mode="updates") == [
        {"gather": None},  # wrote only a private key
        {"conclude": {"findings": "NOTES ON OWLS"}},
    ]
    assert graph.invoke({"question": "owls"}, stream_mode=["values"]) == [
        ("values", {"findings": "NOTES ON OWLS"})  # no chunk for steps that wrote none of them
    ]
    # stream() shows every key, as LangGraph's does
    assert next(graph.stream({"question": "owls"})) == {"gather": {"notes": "notes on owls"}}


def test_a_subgraph_streamed_through_its_parent_shows_its_output_keys():
    class Parent(TypedDict):
        question: str
        findings: str

    builder = StateGraph(Parent)
    builder.add_node("research", research_graph())
    builder.add_edge(START, "research")
    parent = builder.compile()
    chunks = [
        (tuple(p.split(":")[0] for p in ns), mode, data)
        for ns, mode, data in parent.stream(
            {"question": "bats"}, subgraphs=True, stream_mode=["updates", "values"]
        )
    ]
    assert chunks == [
        ((), "values", {"question": "bats"}),
        (("research",), "updates", {"gather": None}),
        (("research",), "updates", {"conclude": {"findings": "NOTES ON BATS"}}),
        (("research",), "values", {"findings": "NOTES ON BATS"}),
        ((), "updates", {"research": {"findings": "NOTES ON BATS"}}),
        ((), "values", {"question": "bats", "findings": "NOTES ON BATS"}),
    ]
