"""What compile() accepts (whatever LangGraph runs), what strict=True and lint() report, and the
run-time error for a route to a node that does not exist."""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from typing_extensions import TypedDict

from threadline import END, START, Command, StateGraph
from threadline.errors import GraphValidationError, InvalidUpdateError


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    choice: str


def append(name: str):
    def node(state: State) -> dict:
        return {"log": [name]}

    return node


# ------------------------------------------------------------------ valid LangGraph programs


def test_a_node_without_an_outgoing_edge_ends_its_branch_and_the_others_go_on():
    g = StateGraph(State)
    g.add_node("fan", append("fan"))
    g.add_node("stops", append("stops"))  # no outgoing edge: its branch ends here
    g.add_node("goes_on", append("goes_on"))
    g.add_node("last", append("last"))
    g.add_edge(START, "fan")
    g.add_edge("fan", "stops")
    g.add_edge("fan", "goes_on")
    g.add_edge("goes_on", "last")
    out = g.compile().invoke({"log": []})
    assert out == {"log": ["fan", "goes_on", "stops", "last"]}


def router(state: State):  # no return annotation, no destinations: as most LangGraph docs write
    return Command(goto=state["choice"], update={"log": ["router"]})


def test_a_command_goto_needs_no_declared_destinations():
    g = StateGraph(State)
    g.add_node("router", router)
    g.add_node("left", append("left"))  # reached only by the Command
    g.add_node("right", append("right"))
    g.add_edge(START, "router")
    graph = g.compile()
    assert graph.invoke({"choice": "left"}) == {"log": ["router", "left"], "choice": "left"}
    assert graph.invoke({"choice": "right"}) == {"log": ["router", "right"], "choice": "right"}


class Letters(TypedDict):
    foo: Annotated[str, operator.add]


def test_the_docs_command_parent_program_compiles_and_runs(capsys):
    """LangGraph's "navigate to a node in a parent graph", with its random choice fixed."""

    def node_a(state: Letters):
        print("Called A")
        return Command(update={"foo": "b"}, goto="node_c", graph=Command.PARENT)

    subgraph = StateGraph(Letters).add_node(node_a).add_edge(START, "node_a").compile()

    def node_b(state: Letters):
        print("Called B")
        return {"foo": "b"}

    def node_c(state: Letters):
        print("Called C")
        return {"foo": "c"}

    builder = StateGraph(Letters)
    builder.add_edge(START, "subgraph")
    builder.add_node("subgraph", subgraph)
    builder.add_node(node_b)
    builder.add_node(node_c)
    graph = builder.compile()

    assert graph.invoke({"foo": ""}) == {"foo": "bc"}
    assert capsys.readouterr().out == "Called A\nCalled C\n"


# ------------------------------------------------------------------ strict=True and lint()


def loose_graph() -> StateGraph:
    """START -> a; ``a`` has no way out and ``orphan`` is reached by nothing declared."""
    g = StateGraph(State)
    g.add_node("a", append("a"))
    g.add_node("orphan", append("orphan"))
    g.add_edge(START, "a")
    g.add_edge("orphan", END)
    return g


def test_strict_compile_lists_every_finding():
    with pytest.raises(GraphValidationError) as caught:
        loose_graph().compile(strict=True)
    message = str(caught.value)
    assert "2 problems" in message
    assert "'orphan' is not reachable" in message
    assert "'a' has no outgoing edge" in message


def test_lint_reports_findings_without_refusing_anything():
    g = loose_graph()
    findings = g.lint()
    assert [(f.kind, f.node) for f in findings] == [("unreachable", "orphan"), ("no_way_out", "a")]
    assert "add_edge('a', END)" in str(findings[1])
    assert g.compile().invoke({"log": []}) == {"log": ["a"]}


def test_a_fully_declared_graph_has_no_findings_and_compiles_strictly():
    g = StateGraph(State)
    g.add_node("router", router, destinations=["left", "right"])
    g.add_node("left", append("left"))
    g.add_node("right", append("right"))
    g.add_edge(START, "router")
    g.add_edge("left", END)
    g.add_edge("right", END)
    assert g.lint() == []
    out = g.compile(strict=True).invoke({"choice": "right"})
    assert out == {"log": ["router", "right"], "choice": "right"}


def test_validate_returns_the_graph_and_refuses_what_cannot_run():
    g = loose_graph()
    assert g.validate() is g
    assert g.validate(interrupt=["a"]) is g
    with pytest.raises(GraphValidationError, match="ghost"):
        g.validate(interrupt=["ghost"])
    g.add_edge("a", "ghost")
    with pytest.raises(GraphValidationError, match="ghost"):
        g.validate()


# ------------------------------------------------------------------ routes to unknown nodes


def test_a_command_to_an_unknown_node_is_a_run_time_error_naming_the_nodes():
    g = StateGraph(State)
    g.add_node("router", router)
    g.add_node("left", append("left"))
    g.add_edge(START, "router")
    with pytest.raises(InvalidUpdateError) as caught:
        g.compile().invoke({"choice": "ghost"})
    assert "'router' routed to 'ghost'" in str(caught.value)
    assert "nodes: router, left" in str(caught.value)


def test_a_branch_returning_an_unknown_node_is_a_run_time_error_naming_the_nodes():
    g = StateGraph(State)
    g.add_node("a", append("a"))
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda state: "nowhere")
    with pytest.raises(InvalidUpdateError, match=r"'a' routed to 'nowhere'.*nodes: a"):
        g.compile().invoke({"log": []})
