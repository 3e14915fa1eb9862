"""State schemas as LangGraph programs write them: every TypedDict flavour, input, output and
node input schemas, values in the schema's key order, pydantic's own validation errors."""

from __future__ import annotations

import operator
import typing
import warnings
from dataclasses import dataclass
from typing import Annotated, NotRequired, Required

import pydantic
import pytest
import typing_extensions
from typing_extensions import TypedDict

from threadline import END, START, StateGraph
from threadline.checkpoint import SqliteSaver
from threadline.errors import GraphValidationError


def one_node_graph(schema: type, node, **compile_kw):
    g = StateGraph(schema)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g.compile(**compile_kw)


def cfg(thread: str = "1") -> dict:
    return {"configurable": {"thread_id": thread}}


# ------------------------------------------------------------------ TypedDict flavours


class ExtState(typing_extensions.TypedDict):
    items: Annotated[list[str], operator.add]
    note: str


class StdState(typing.TypedDict):
    items: Annotated[list[str], operator.add]
    note: str


@pytest.mark.parametrize("schema", [ExtState, StdState], ids=["typing_extensions", "typing"])
def test_typeddicts_of_typing_and_typing_extensions_are_state_schemas(schema):
    graph = one_node_graph(schema, lambda state: {"items": ["b"], "note": "done"})
    assert graph.invoke({"items": ["a"]}) == {"items": ["a", "b"], "note": "done"}


class Qualified(TypedDict, total=False):
    required_log: Required[Annotated[list[str], operator.add]]
    optional_log: NotRequired[Annotated[list[str], operator.add]]
    count: int


def test_reducers_are_found_inside_required_and_not_required():
    graph = one_node_graph(
        Qualified, lambda state: {"required_log": ["r"], "optional_log": ["o"], "count": 1}
    )
    out = graph.invoke({"required_log": ["r0"], "optional_log": ["o0"]})
    assert out == {"required_log": ["r0", "r"], "optional_log": ["o0", "o"], "count": 1}


class Base(TypedDict):
    log: Annotated[list[str], operator.add]


class Derived(Base, total=False):
    extra: str


def test_an_inherited_typeddict_keeps_its_base_keys_and_reducers():
    graph = one_node_graph(Derived, lambda state: {"log": ["node"], "extra": "x"})
    assert graph.invoke({"log": ["in"]}) == {"log": ["in", "node"], "extra": "x"}


# ------------------------------------------------------------------ key order


class Ordered(TypedDict, total=False):
    first: str
    second: str
    third: str
    unset: str


def test_values_come_back_in_the_schema_order_and_unwritten_keys_are_absent(tmp_path):
    def writes_backwards(state: Ordered) -> dict:
        return {"third": "3", "second": "2"}

    saver = SqliteSaver(str(tmp_path / "order.db"))
    graph = one_node_graph(Ordered, writes_backwards, checkpointer=saver)
    out = graph.invoke({"third": "input", "first": "1"}, cfg())
    assert list(out) == ["first", "second", "third"]
    assert list(graph.get_state(cfg()).values) == ["first", "second", "third"]
    chunks = list(graph.stream({"third": "x", "first": "1"}, cfg("2"), stream_mode="values"))
    assert [list(c) for c in chunks] == [["first", "third"], ["first", "second", "third"]]


# ------------------------------------------------------------------ pydantic


class Model(pydantic.BaseModel):
    a: str


def test_invalid_pydantic_input_raises_pydantics_own_validation_error():
    graph = one_node_graph(Model, lambda state: {"a": state.a + "!"})
    assert graph.invoke({"a": "hello"}) == {"a": "hello!"}
    with pytest.raises(pydantic.ValidationError) as caught:
        graph.invoke({"a": 123})
    assert "1 validation error for Model" in str(caught.value)
    assert any("does not fit Model" in note for note in caught.value.__notes__)


def test_a_node_writing_an_invalid_value_fails_the_next_node_with_a_validation_error():
    g = StateGraph(Model)
    g.add_node("bad_node", lambda state: {"a": 123})
    g.add_node("ok_node", lambda state: {"a": "goodbye"})
    g.add_edge(START, "bad_node")
    g.add_edge("bad_node", "ok_node")
    g.add_edge("ok_node", END)
    with pytest.raises(pydantic.ValidationError, match="a\n  Input should be a valid string"):
        g.compile().invoke({"a": "hello"})


# ------------------------------------------------------------------ input and output schemas


class InputState(TypedDict):
    user_input: str


class OutputState(TypedDict):
    graph_output: str


class OverallState(TypedDict):
    foo: str
    user_input: str
    graph_output: str


class PrivateState(TypedDict):
    bar: str


def node_1(state: InputState) -> OverallState:
    return {"foo": state["user_input"] + " name"}


def node_2(state: OverallState) -> PrivateState:
    return {"bar": state["foo"] + " is"}


def node_3(state: PrivateState) -> OutputState:
    return {"graph_output": state["bar"] + " Lance"}


def multiple_schemas(**compile_kw):
    """LangGraph's "multiple schemas" how-to, as its docs write it."""
    builder = StateGraph(OverallState, input_schema=InputState, output_schema=OutputState)
    builder.add_node("node_1", node_1)
    builder.add_node("node_2", node_2)
    builder.add_node("node_3", node_3)
    builder.add_edge(START, "node_1")
    builder.add_edge("node_1", "node_2")
    builder.add_edge("node_2", "node_3")
    builder.add_edge("node_3", END)
    return builder.compile(**compile_kw)


def test_the_docs_multiple_schemas_program_prints_what_langgraph_prints(capsys):
    print(multiple_schemas().invoke({"user_input": "My"}))
    assert capsys.readouterr().out == "{'graph_output': 'My name is Lance'}\n"


def test_the_values_stream_and_state_show_every_channel_in_schema_order(tmp_path):
    """Only invoke's result is narrowed to the output schema, as in LangGraph."""
    graph = multiple_schemas(checkpointer=SqliteSaver(str(tmp_path / "s.db")))
    chunks = list(graph.stream({"user_input": "My"}, cfg(), stream_mode="values"))
    assert chunks == [
        {"user_input": "My"},
        {"foo": "My name", "user_input": "My"},
        {"foo": "My name", "user_input": "My", "bar": "My name is"},
        {
            "foo": "My name",
            "user_input": "My",
            "graph_output": "My name is Lance",
            "bar": "My name is",
        },
    ]
    assert [list(c) for c in chunks][-1] == ["foo", "user_input", "graph_output", "bar"]
    values = graph.get_state(cfg()).values
    assert list(values.items()) == list(chunks[-1].items())


def test_input_keys_outside_the_input_schema_are_dropped():
    seen = []

    def node(state: OverallState) -> dict:
        seen.append(dict(state))
        return {"graph_output": "out"}

    g = StateGraph(OverallState, input_schema=InputState, output_schema=OutputState)
    g.add_node("node", node)
    g.add_edge(START, "node")
    assert g.compile().invoke({"user_input": "u", "foo": "not an input"}) == {"graph_output": "out"}
    assert seen == [{"user_input": "u"}]


def test_deprecated_input_and_output_keywords_still_work_with_a_warning():
    with pytest.warns(DeprecationWarning) as caught:
        g = StateGraph(OverallState, input=InputState, output=OutputState)
    assert sorted(str(w.message) for w in caught) == [
        "StateGraph(input=...) is deprecated; use input_schema=...",
        "StateGraph(output=...) is deprecated; use output_schema=...",
    ]
    assert (g.input_schema, g.output_schema) == (InputState, OutputState)


def test_an_unknown_keyword_is_refused():
    with pytest.raises(TypeError, match="output_shema"):
        StateGraph(OverallState, output_shema=OutputState)


class Context(TypedDict):
    user_id: str


def test_the_context_schema_is_kept_on_the_builder_and_the_compiled_graph():
    g = StateGraph(OverallState, Context)
    g.add_node("node_1", node_1)
    g.add_edge(START, "node_1")
    assert g.context_schema is Context
    assert g.compile().spec.context_schema is Context
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert StateGraph(OverallState, config_schema=Context).context_schema is Context


# ------------------------------------------------------------------ node input schemas


class Public(TypedDict, total=False):
    question: str
    answer: str


class Private(TypedDict, total=False):
    question: str
    scratch: str


def test_a_node_input_schema_passes_private_keys_between_nodes():
    seen = []

    def think(state: Public) -> dict:
        return {"scratch": state["question"] + "?"}

    def reply(state: Private) -> dict:  # inferred from the annotation
        seen.append(dict(state))
        return {"answer": state["scratch"] + "!"}

    def explicit(state) -> dict:
        seen.append(dict(state))
        return {}

    g = StateGraph(Public)
    g.add_node("think", think)
    g.add_node("reply", reply)
    g.add_node("explicit", explicit, input_schema=Private)
    g.add_edge(START, "think")
    g.add_edge("think", "reply")
    g.add_edge("reply", "explicit")
    g.add_edge("explicit", END)
    out = g.compile().invoke({"question": "why"})
    assert out == {"question": "why", "answer": "why?!"}
    assert seen == [{"question": "why", "scratch": "why?"}] * 2


@dataclass
class Scratch:
    scratch: str = ""


class Prompt(pydantic.BaseModel):
    question: str


def test_node_input_schemas_may_be_dataclasses_or_pydantic_models():
    got = []

    def first(state: Prompt) -> dict:
        got.append(state)
        return {"scratch": state.question.upper()}

    def second(state: Scratch) -> dict:
        got.append(state)
        return {"answer": state.scratch}

    g = StateGraph(Public)
    g.add_sequence([first, second])
    g.add_edge(START, "first")
    assert g.compile().invoke({"question": "q"}) == {"question": "q", "answer": "Q"}
    assert got == [Prompt(question="q"), Scratch(scratch="Q")]


class OtherReducer(TypedDict):
    log: Annotated[list[str], lambda a, b: b + a]


def test_one_key_with_two_different_reducers_is_refused():
    with pytest.raises(GraphValidationError, match="'log'"):
        StateGraph(Base, input_schema=OtherReducer).compile()


class Settings(pydantic.BaseModel):
    name: str = "default"
    count: int = 0
    note: str | None = None
    items: Annotated[list[str], operator.add] = []


def test_a_pydantic_instance_as_input_writes_its_fields_as_langgraph_does():
    """Every field, defaults included, except one left at a ``None`` default."""
    seen = []

    def node(state: Settings) -> dict:
        seen.append(state)
        return {"items": ["node"]}

    out = one_node_graph(Settings, node).invoke(Settings(count=5))
    assert out == {"name": "default", "count": 5, "items": ["node"]}
    assert seen == [Settings(count=5)]


class Reader:
    """A callable object: its ``__call__`` annotation names the input schema."""

    def __init__(self) -> None:
        self.seen: list[dict] = []

    def __call__(self, state: Private) -> dict:
        self.seen.append(dict(state))
        return {}


def test_a_callable_objects_call_annotation_gives_its_input_schema():
    reader = Reader()
    g = StateGraph(Public)
    g.add_node("reader", reader)
    g.add_edge(START, "reader")
    g.compile().invoke({"question": "q", "answer": "a"})
    assert reader.seen == [{"question": "q"}]


class A(TypedDict):
    a: str


class Node1Output(TypedDict):
    private_data: str


class Node2Input(TypedDict):
    private_data: str


def private_node_1(state: A) -> Node1Output:
    output = {"private_data": "set by node_1"}
    print(f"Entered node `node_1`:\n\tInput: {state}.\n\tReturned: {output}")
    return output


def private_node_2(state: Node2Input) -> A:
    output = {"a": "set by node_2"}
    print(f"Entered node `node_2`:\n\tInput: {state}.\n\tReturned: {output}")
    return output


def private_node_3(state: A) -> A:
    output = {"a": "set by node_3"}
    print(f"Entered node `node_3`:\n\tInput: {state}.\n\tReturned: {output}")
    return output


def test_the_docs_pass_private_state_program_prints_what_langgraph_prints(capsys):
    graph = (
        StateGraph(A)
        .add_sequence(
            [("node_1", private_node_1), ("node_2", private_node_2), ("node_3", private_node_3)]
        )
        .add_edge(START, "node_1")
        .compile()
    )
    response = graph.invoke({"a": "set at start"})
    print()
    print(f"Output of graph invocation: {response}")
    assert capsys.readouterr().out == (
        "Entered node `node_1`:\n\tInput: {'a': 'set at start'}.\n"
        "\tReturned: {'private_data': 'set by node_1'}\n"
        "Entered node `node_2`:\n\tInput: {'private_data': 'set by node_1'}.\n"
        "\tReturned: {'a': 'set by node_2'}\n"
        "Entered node `node_3`:\n\tInput: {'a': 'set by node_2'}.\n"
        "\tReturned: {'a': 'set by node_3'}\n"
        "\n"
        "Output of graph invocation: {'a': 'set by node_3'}\n"
    )
