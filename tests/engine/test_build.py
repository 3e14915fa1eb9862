"""Building a graph: what compile() refuses (naming the culprit), and the builder conveniences."""

from __future__ import annotations

import operator
import re
from typing import Annotated, Any, Literal, TypedDict

import pytest

from threadline import END, START, Command, StateGraph
from threadline.errors import GraphValidationError, InvalidUpdateError


class State(TypedDict, total=False):
    value: str
    log: Annotated[list[str], operator.add]


def step(name: str):
    def node(state: State) -> dict:
        return {"log": [name]}

    return node


def chain(*names: str) -> StateGraph:
    """START -> names[0] -> ... -> names[-1] -> END, every node appending its name to the log."""
    g = StateGraph(State)
    previous = START
    for name in names:
        g.add_node(name, step(name))
        g.add_edge(previous, name)
        previous = name
    g.add_edge(previous, END)
    return g


# ------------------------------------------------------------------ unknown nodes


def test_edge_to_an_unknown_node_is_refused_naming_it():
    g = chain("a")
    g.add_edge("a", "ghost")
    with pytest.raises(GraphValidationError, match="ghost"):
        g.compile()


def test_edge_from_an_unknown_node_is_refused_naming_it():
    g = chain("a")
    g.add_edge("ghost", "a")
    with pytest.raises(GraphValidationError, match="ghost"):
        g.compile()


def test_join_edge_naming_an_unknown_source_is_refused():
    g = chain("a", "b")
    g.add_edge(["a", "ghost"], "b")
    with pytest.raises(GraphValidationError, match="ghost"):
        g.compile()


@pytest.mark.parametrize(
    "path_map",
    [{"left": "a", "right": "ghost"}, ["a", "ghost"]],
    ids=["dict", "list"],
)
def test_path_map_naming_an_unknown_node_is_refused(path_map):
    g = StateGraph(State)
    g.add_node("a", step("a"))
    g.add_edge("a", END)
    g.add_conditional_edges(START, lambda s: "a", path_map)
    with pytest.raises(GraphValidationError, match="ghost"):
        g.compile()


def test_edges_may_name_nodes_added_later():
    g = StateGraph(State)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    g.add_node("a", step("a"))
    g.add_node("b", step("b"))
    assert g.compile().invoke({"log": []}) == {"log": ["a", "b"]}


# ------------------------------------------------------------------ reachability and ways out


def test_a_node_nobody_can_reach_is_refused_by_strict_compile_naming_it():
    g = chain("a")
    g.add_node("orphan", step("orphan"))
    g.add_edge("orphan", END)
    assert g.compile().invoke({"log": []}) == {"log": ["a"]}  # LangGraph accepts it too
    with pytest.raises(GraphValidationError, match="orphan"):
        g.compile(strict=True)


def test_a_node_with_no_way_out_is_refused_by_strict_compile_naming_it():
    g = chain("a")
    g.add_node("dead_end", step("dead_end"))
    g.add_edge("a", "dead_end")
    assert g.compile().invoke({"log": []}) == {"log": ["a", "dead_end"]}
    with pytest.raises(GraphValidationError, match="dead_end"):
        g.compile(strict=True)


def router_by_annotation(state: State) -> Command[Literal["target", "__end__"]]:
    return Command(goto="target", update={"log": ["router"]})


def test_command_return_annotation_declares_where_a_node_goes():
    """``-> Command[Literal[...]]`` makes the target reachable and gives the router a way out."""
    g = StateGraph(State)
    g.add_node("router", router_by_annotation)
    g.add_node("target", step("target"))
    g.add_edge(START, "router")
    g.add_edge("target", END)
    graph = g.compile()
    assert graph.invoke({"log": []}) == {"log": ["router", "target"]}


def test_destinations_declare_where_a_node_goes():
    def router(state: State) -> Command:
        return Command(goto="target", update={"log": ["router"]})

    g = StateGraph(State)
    g.add_node("router", router, destinations=["target", END])
    g.add_node("target", step("target"))
    g.add_edge(START, "router")
    g.add_edge("target", END)
    graph = g.compile()
    assert graph.invoke({"log": []}) == {"log": ["router", "target"]}


def test_destinations_naming_an_unknown_node_are_refused():
    g = chain("a")
    g.add_node("router", step("router"), destinations=["ghost"])
    g.add_edge("a", "router")
    with pytest.raises(GraphValidationError, match="ghost"):
        g.compile()


# ------------------------------------------------------------------ names and edge ends


@pytest.mark.parametrize("name", [START, END])
def test_reserved_node_names_are_refused(name):
    g = StateGraph(State)
    with pytest.raises(GraphValidationError, match=re.escape(name)):
        g.add_node(name, step("x"))
        g.add_edge(START, name)
        g.compile()


def test_a_duplicate_node_is_refused_naming_it():
    g = StateGraph(State)
    g.add_node("twice", step("twice"))
    with pytest.raises(GraphValidationError, match="twice"):
        g.add_node("twice", step("again"))
        g.add_edge(START, "twice")
        g.add_edge("twice", END)
        g.compile()


def test_an_edge_cannot_start_at_end():
    g = chain("a")
    with pytest.raises(GraphValidationError, match=r"END|__end__"):
        g.add_edge(END, "a")
        g.compile()


def test_an_edge_cannot_end_at_start():
    g = chain("a")
    with pytest.raises(GraphValidationError, match=r"START|__start__"):
        g.add_edge("a", START)
        g.compile()


def test_a_graph_without_an_entry_point_is_refused():
    g = StateGraph(State)
    g.add_node("a", step("a"))
    g.add_edge("a", END)
    with pytest.raises(GraphValidationError, match=r"entry|START|__start__"):
        g.compile()


# ------------------------------------------------------------------ breakpoints


@pytest.mark.parametrize("option", ["interrupt_before", "interrupt_after"])
def test_breakpoint_on_an_unknown_node_is_refused_at_compile(option):
    g = chain("a")
    with pytest.raises(GraphValidationError, match="ghost"):
        g.compile(**{option: ["ghost"]})


@pytest.mark.parametrize("option", ["interrupt_before", "interrupt_after"])
def test_breakpoint_on_an_unknown_node_is_refused_per_call(option):
    from threadline.checkpoint import InMemorySaver

    calls: list[str] = []
    g = StateGraph(State)
    g.add_node("a", lambda s: calls.append("a") or {"log": ["a"]})
    g.add_edge(START, "a")
    g.add_edge("a", END)
    graph = g.compile(checkpointer=InMemorySaver())
    with pytest.raises(GraphValidationError, match="ghost"):
        graph.invoke({"log": []}, {"configurable": {"thread_id": "t"}}, **{option: ["ghost"]})
    assert calls == []


# ------------------------------------------------------------------ state schemas


def one_arg(current):
    return current


def three_args(current, update, extra):
    return current + update


@pytest.mark.parametrize("reducer", [one_arg, three_args], ids=["one-arg", "three-args"])
def test_a_reducer_that_does_not_take_two_arguments_is_refused(reducer):
    # functional form: class syntax could not see the local ``reducer`` under postponed annotations
    bad = TypedDict("Bad", {"items": Annotated[list, reducer]})  # noqa: UP013
    with pytest.raises(GraphValidationError, match="items"):
        g = StateGraph(bad)
        g.add_node("a", step("a"))
        g.add_edge(START, "a")
        g.add_edge("a", END)
        g.compile()


def test_a_two_argument_reducer_is_used():
    def merge(current: dict, update: dict) -> dict:
        return {**current, **update}

    merged = TypedDict("Merged", {"seen": Annotated[dict, merge]})  # noqa: UP013
    g = StateGraph(merged)
    g.add_node("a", lambda s: {"seen": {"a": 1}})
    g.add_node("b", lambda s: {"seen": {"b": 2}})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    assert g.compile().invoke({"seen": {"in": 0}}) == {"seen": {"in": 0, "a": 1, "b": 2}}


class PlainClass:
    value: str


def test_a_plain_annotated_class_is_a_state_of_keys_read_as_dicts():
    seen = []

    def a(state: Any) -> dict:
        seen.append(state)
        return {"value": "b"}

    g = StateGraph(PlainClass)
    g.add_node("a", a)
    g.add_edge(START, "a")
    assert g.compile().invoke({"value": "a"}) == {"value": "b"}  # as in LangGraph
    assert seen == [{"value": "a"}]
    with pytest.raises(InvalidUpdateError, match="other"):
        g.compile().invoke({"other": 1})


# ------------------------------------------------------------------ builder conveniences


def fetch(state: State) -> dict:
    return {"log": ["fetch"]}


def parse(state: State) -> dict:
    return {"log": ["parse"]}


def save(state: State) -> dict:
    return {"log": ["save"]}


def test_add_node_with_only_a_function_names_the_node_after_it():
    g = StateGraph(State)
    g.add_node(fetch)
    g.add_edge(START, "fetch")
    g.add_edge("fetch", END)
    graph = g.compile()
    assert "fetch" in graph.get_graph().nodes
    assert list(graph.stream({"log": []})) == [{"fetch": {"log": ["fetch"]}}]


def test_add_sequence_chains_nodes_in_order():
    g = StateGraph(State)
    g.add_sequence([fetch, ("transform", step("transform")), parse, save])
    g.add_edge(START, "fetch")
    g.add_edge("save", END)
    graph = g.compile()
    assert graph.invoke({"log": []}) == {"log": ["fetch", "transform", "parse", "save"]}


def test_set_entry_point_and_set_finish_point():
    g = StateGraph(State)
    g.add_node(fetch)
    g.add_node(save)
    g.add_edge("fetch", "save")
    g.set_entry_point("fetch")
    g.set_finish_point("save")
    assert g.compile().invoke({"log": []}) == {"log": ["fetch", "save"]}


def test_set_conditional_entry_point_routes_from_start():
    g = StateGraph(State)
    g.add_node(fetch)
    g.add_node(save)
    g.add_edge("fetch", END)
    g.add_edge("save", END)
    g.set_conditional_entry_point(lambda s: "save" if s["value"] == "s" else "fetch")
    graph = g.compile()
    assert graph.invoke({"value": "s", "log": []})["log"] == ["save"]
    assert graph.invoke({"value": "f", "log": []})["log"] == ["fetch"]


# ------------------------------------------------------------------ drawing

# ``a --> b``, ``a -.-> b``, and labelled as LangGraph writes them: ``a -. &nbsp;ok&nbsp; .-> b``
EDGE_LINE = re.compile(r"^\s*(\w+)\s+(-->|-\.->|-\. .*? \.->|-- .*? -->)\s+(\w+);?\s*$")


def mermaid_edges(text: str) -> set[tuple[str, str, bool]]:
    """``(source, target, dotted)`` for every edge line of a Mermaid flowchart."""
    found = set()
    for line in text.splitlines():
        m = EDGE_LINE.match(line)
        if m:
            found.add((m.group(1), m.group(3), m.group(2).startswith("-.")))
    return found


def test_draw_mermaid_shows_every_node_and_edge_with_conditional_edges_dotted():
    g = StateGraph(State)
    g.add_node(fetch)
    g.add_node(parse)
    g.add_node(save)
    g.add_edge(START, "fetch")
    g.add_conditional_edges("fetch", lambda s: "parse", {"ok": "parse", "skip": "save"})
    g.add_edge("parse", "save")
    g.add_edge("save", END)
    text = g.compile().get_graph().draw_mermaid()
    for name in (START, "fetch", "parse", "save", END):
        assert name in text
    assert mermaid_edges(text) == {
        (START, "fetch", False),
        ("fetch", "parse", True),
        ("fetch", "save", True),
        ("parse", "save", False),
        ("save", END, False),
    }


def test_compile_debug_true_prints_updates_and_values(capsys):
    class N(TypedDict):
        n: int

    g = StateGraph(N)
    g.add_node("a", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "a")
    g.add_edge("a", END)
    assert g.compile(debug=True).invoke({"n": 1}) == {"n": 2}
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "\x1b[1m[values]\x1b[0m {'n': 1}",
        "\x1b[1m[updates]\x1b[0m {'a': {'n': 2}}",
        "\x1b[1m[values]\x1b[0m {'n': 2}",
    ]
    assert g.compile(debug=False).invoke({"n": 1}) == {"n": 2}
    assert capsys.readouterr().out == ""
