"""On every saver: the schema is stored with the interrupt, and a refused answer writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
import typing_extensions

from threadline import START, Command, StateGraph, interrupt
from threadline.errors import InvalidAnswerError

SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"}},
    "required": ["approved"],
}


class State(typing_extensions.TypedDict, total=False):
    approved: bool


def test_a_refused_answer_leaves_the_thread_as_it_was(saver) -> None:
    runs: list[int] = []

    def ask(state: State) -> dict[str, Any]:
        runs.append(1)
        return {"approved": interrupt("approve?", schema=SCHEMA)["approved"]}

    g = StateGraph(State)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    graph = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "every"}}
    graph.invoke({}, config)
    before = graph.get_state(config)
    assert before.interrupts[0].schema == SCHEMA
    history = list(graph.get_state_history(config))

    with pytest.raises(InvalidAnswerError, match="approved: expected boolean, got str 'yes'"):
        graph.invoke(Command(resume={"approved": "yes"}), config)
    assert graph.get_state(config) == before
    assert list(graph.get_state_history(config)) == history
    assert runs == [1]

    assert graph.invoke(Command(resume={"approved": True}), config) == {"approved": True}
    assert runs == [1, 1]
