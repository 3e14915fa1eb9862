"""``add_node``'s LangGraph keywords, ``set_node_defaults``, runnables as nodes, and
``get_graph``/``draw_mermaid``'s keywords."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.graph import NodeStyles
from langchain_core.tools import StructuredTool

from threadline import START, Command, RetryPolicy, StateGraph
from threadline.errors import NodeError, NotSupportedError
from threadline.types import TimeoutPolicy, TracePolicy


class State(TypedDict):
    x: int
    log: Annotated[list[str], operator.add]


def test_runnables_run_as_nodes_sync_and_async():
    double = RunnableLambda(lambda s: {"x": s["x"] * 2}) | RunnableLambda(lambda u: u)

    def add(x: int, log: list[str]) -> dict:
        """Add one."""
        return {"x": x + 1, "log": ["tool"]}

    tool = StructuredTool.from_function(add)
    g = StateGraph(State)
    g.add_node("double", double)
    g.add_node("tool", tool)
    g.add_edge(START, "double")
    g.add_edge("double", "tool")
    graph = g.compile()
    assert graph.invoke({"x": 3, "log": []}) == {"x": 7, "log": ["tool"]}


async def test_a_runnable_node_runs_its_ainvoke_in_async_runs():
    seen = []

    async def afunc(state: dict) -> dict:
        seen.append("async")
        return {"x": 1}

    g = StateGraph(State)
    g.add_node("n", RunnableLambda(lambda s: {"x": 0}, afunc=afunc))
    g.add_edge(START, "n")
    assert (await g.compile().ainvoke({"x": 0, "log": []}))["x"] == 1
    assert seen == ["async"]


def test_a_list_of_retry_policies_first_match_decides():
    calls = []

    def flaky(state: State) -> dict:
        calls.append(1)
        if len(calls) < 3:
            raise KeyError("again")
        return {"x": len(calls)}

    g = StateGraph(State)
    policies = [
        RetryPolicy(retry_on=ValueError, max_attempts=1),
        RetryPolicy(retry_on=KeyError, max_attempts=3, initial_interval=0, jitter=False),
    ]
    g.add_node("flaky", flaky, retry_policy=policies)
    g.add_edge(START, "flaky")
    assert g.compile().invoke({"x": 0, "log": []})["x"] == 3


def test_set_node_defaults_apply_to_nodes_without_their_own():
    calls = {"a": 0, "b": 0}

    def failing(name):
        def node(state: State) -> dict:
            calls[name] += 1
            raise ConnectionError(name)

        return node

    g = StateGraph(State)
    g.add_node("a", failing("a"))
    g.add_node("b", failing("b"), retry_policy=RetryPolicy(max_attempts=1))
    g.set_node_defaults(retry_policy=RetryPolicy(max_attempts=2, initial_interval=0, jitter=False))
    g.set_node_defaults(timeout=5)
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    with pytest.raises(ConnectionError):
        g.compile().invoke({"x": 0, "log": []})
    assert calls == {"a": 2, "b": 1}
    compiled = g.compile()
    assert compiled.spec.nodes["a"].timeout == TimeoutPolicy(run_timeout=5)


def bad(state: State) -> dict:
    raise ValueError("boom")


def handler(state: State, error: NodeError) -> dict:
    return {"log": [f"handled {error.node}: {error.error!r}"]}


def test_an_error_handler_takes_the_failed_tasks_place(saver):
    g = StateGraph(State)
    g.add_node("a", bad, error_handler=handler)
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")  # does not fire after a handled failure, as in LangGraph
    graph = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    assert graph.invoke({"x": 0, "log": []}, config) == {
        "x": 0,
        "log": ["handled a: ValueError('boom')"],
    }
    assert graph.get_state(config).next == ()
    assert len(list(graph.get_state_history(config))) == 3


async def test_a_handler_routes_with_command_and_may_be_async():
    async def rescue(state: State, failure: NodeError) -> Command:
        return Command(update={"log": [f"rescued {failure.node}"]}, goto="c")

    g = StateGraph(State)
    g.add_node("a", bad, error_handler=rescue)
    g.add_node("c", lambda s: {"log": ["c"]})
    g.add_edge(START, "a")
    assert (await g.compile().ainvoke({"x": 0, "log": []}))["log"] == ["rescued a", "c"]


def test_default_handler_retries_first_and_a_failing_handler_fails_the_run():
    attempts = []

    def flaky(state: State) -> dict:
        attempts.append(1)
        raise ConnectionError("down")

    g = StateGraph(State)
    g.set_node_defaults(
        error_handler=handler, retry_policy=RetryPolicy(max_attempts=2, initial_interval=0)
    )
    g.add_node("a", flaky)
    g.add_node("b", bad)
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    assert g.compile().invoke({"x": 0, "log": []})["log"] == [
        "handled a: ConnectionError('down')",
        "handled b: ValueError('boom')",
    ]
    assert len(attempts) == 2

    def broken(state: State, error: NodeError) -> dict:
        raise RuntimeError("handler broke")

    g = StateGraph(State)
    g.add_node("a", bad, error_handler=broken)
    g.add_edge(START, "a")
    with pytest.raises(RuntimeError, match="handler broke"):
        g.compile().invoke({"x": 0, "log": []})


def drawn():
    g = StateGraph(State)
    g.add_node("a", lambda s: {}, metadata={"k": 1, "z": "two words"}, defer=True)
    g.add_node("c", lambda s: {}, destinations={"a": "back"}, trace_policy=TracePolicy())
    g.add_edge(START, "a")
    g.add_edge("a", "c")
    return g.compile()


def test_draw_mermaid_shows_metadata_and_destination_labels():
    text = drawn().get_graph().draw_mermaid()
    assert "\ta(a<hr/><small><em>k = 1\nz = two words\ndefer = True</em></small>)\n" in text
    assert "\tc -. &nbsp;back&nbsp; .-> a;\n" in text


def test_draw_mermaid_keywords_as_langgraph():
    graph = drawn().get_graph(config={"configurable": {}}, xray=True)
    plain = graph.draw_mermaid(with_styles=False)
    assert plain.startswith("graph TD;\n\t__start__ --> a;\n\ta --> c;\n")
    assert "classDef" not in plain and "---" not in plain
    themed = graph.draw_mermaid(frontmatter_config={"config": {"theme": "neutral"}})
    assert themed.startswith(
        "---\nconfig:\n  flowchart:\n    curve: linear\n  theme: neutral\n---\n"
    )
    colored = graph.draw_mermaid(node_colors=NodeStyles(default="fill:#fff"))
    assert "\tclassDef default fill:#fff\n\tclassDef first fill-opacity:0\n" in colored


def test_xray_on_a_graph_with_subgraphs_is_refused():
    inner = StateGraph(State)
    inner.add_node("i", lambda s: {})
    inner.add_edge(START, "i")
    outer = StateGraph(State)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    with pytest.raises(NotSupportedError, match="xray"):
        outer.compile().get_graph(xray=1)
    assert outer.compile().get_graph().draw_mermaid()
