"""LangGraph's Runnable methods (batch, with_config, JSON schemas) and its Mermaid text."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import pytest
from langgraph_graphs import (
    DraftState,
    asking_graph,
    cfg,
    single,
)

from threadline import END, START, StateGraph
from threadline.checkpoint import InMemorySaver
from threadline.errors import (
    GraphRecursionError,
)


# ------------------------------------------------------------------ Runnable methods
class Num(TypedDict):
    n: int


def doubler(**compile_kw):
    return single("double", lambda s: {"n": s["n"] * 2}, schema=Num, **compile_kw)


def test_batch_runs_every_input_and_keeps_their_order():
    graph = doubler()
    assert graph.batch([{"n": 1}, {"n": 2}, {"n": 3}]) == [{"n": 2}, {"n": 4}, {"n": 6}]
    assert graph.batch([]) == []
    assert asyncio.run(graph.abatch([{"n": 5}, {"n": 6}])) == [{"n": 10}, {"n": 12}]


def test_batch_with_a_config_each_and_errors_returned():
    graph = doubler(checkpointer=InMemorySaver())
    out = graph.batch([{"n": 1}, {"n": None}], [cfg("a"), cfg("b")], return_exceptions=True)
    assert out[0] == {"n": 2} and isinstance(out[1], TypeError)
    assert graph.get_state(cfg("a")).values == {"n": 2}
    with pytest.raises(ValueError, match="2 inputs but 1 configs"):
        graph.batch([{"n": 1}, {"n": 2}], [cfg("a")])
    with pytest.raises(ValueError, match="max_concurrency"):
        graph.batch([{"n": 1}], {"max_concurrency": 0})


def test_with_config_binds_config_under_each_calls_own():
    graph = doubler(checkpointer=InMemorySaver())
    bound = graph.with_config({"configurable": {"thread_id": "bound"}}, recursion_limit=5)
    assert bound.invoke({"n": 21}) == {"n": 42}
    assert bound.get_state({}).values == {"n": 42}
    assert bound.invoke({"n": 1}, cfg("own")) == {"n": 2}  # the call's thread wins
    assert graph.get_state(cfg("own")).values == {"n": 2}
    assert graph.config is None and bound.name == graph.name

    builder = StateGraph(Num)
    builder.add_sequence([("one", lambda s: {"n": 1}), ("two", lambda s: {"n": 2})])
    builder.add_edge(START, "one")
    limited = builder.compile().with_config(recursion_limit=1)
    with pytest.raises(GraphRecursionError, match="Recursion limit of 1 reached"):
        limited.invoke({"n": 0})
    assert limited.invoke({"n": 0}, {"recursion_limit": 2}) == {"n": 2}


def test_input_and_output_jsonschema_follow_the_io_schemas():
    class In(TypedDict):
        question: str

    class Out(TypedDict):
        answer: str

    class Everything(In, Out):
        notes: list[str]

    builder = StateGraph(Everything, input_schema=In, output_schema=Out)
    builder.add_node("answer", lambda s: {"answer": s["question"].upper()})
    builder.add_edge(START, "answer")
    graph = builder.compile(name="qa")
    assert graph.get_input_jsonschema() == {
        "properties": {"question": {"title": "Question", "type": "string"}},
        "required": ["question"],
        "title": "In",
        "type": "object",
    }
    assert graph.get_output_jsonschema()["properties"] == {
        "answer": {"title": "Answer", "type": "string"}
    }
    assert doubler().get_input_jsonschema()["properties"] == {
        "n": {"title": "N", "type": "integer"}
    }
    assert asking_graph(DraftState).get_output_jsonschema()["title"] == "LangGraph_output"


# ------------------------------------------------------------------ drawing
def test_draw_mermaid_writes_what_langgraph_writes():
    def noop(state: Num) -> dict:
        return {}

    builder = StateGraph(Num)
    for name in ("fetch", "parse", "save", "Zed", "lonely", "my step"):
        builder.add_node(name, noop)
    builder.add_edge(START, "fetch")
    builder.add_edge(START, "Zed")
    route = {"ok": "parse", "skip": "save", "done": END, "my step": "my step"}
    builder.add_conditional_edges("fetch", lambda s: "ok", route)
    builder.add_edge("parse", "save")
    builder.add_edge("Zed", "lonely")  # lonely has no edge out: it ends its branch
    builder.add_edge("save", END)
    builder.add_edge("my step", END)

    assert builder.compile().get_graph().draw_mermaid() == (
        "---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n"
        "\t__start__([<p>__start__</p>]):::first\n"
        "\tfetch(fetch)\n\tparse(parse)\n\tsave(save)\n\tZed(Zed)\n\tlonely(lonely)\n"
        "\tmy\\20step(my step)\n"
        "\t__end__([<p>__end__</p>]):::last\n"
        "\tZed --> lonely;\n"
        "\t__start__ --> Zed;\n"
        "\t__start__ --> fetch;\n"
        "\tfetch -. &nbsp;done&nbsp; .-> __end__;\n"
        "\tfetch -.-> my\\20step;\n"
        "\tfetch -. &nbsp;ok&nbsp; .-> parse;\n"
        "\tfetch -. &nbsp;skip&nbsp; .-> save;\n"
        "\tparse --> save;\n"
        "\tlonely --> __end__;\n"
        "\tmy\\20step --> __end__;\n"
        "\tsave --> __end__;\n"
        "\tclassDef default fill:#f2f0ff,line-height:1.2\n"
        "\tclassDef first fill-opacity:0\n"
        "\tclassDef last fill:#bfb6fc\n"
    )
