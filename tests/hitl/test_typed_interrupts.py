"""interrupt(value, schema=...): the schema shown with the interrupt, answers checked at resume.

Every test runs on a real SQLite file, so what is checked is what was stored and loaded again.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest
import typing_extensions

from threadline import END, START, Command, Interrupt, StateGraph, interrupt, serde
from threadline.checkpoint import SqliteSaver
from threadline.errors import InvalidAnswerError, InvalidResumeError, InvalidSchemaError


@serde.register  # the node keeps the answer in its state, which stores it
class Refund(pydantic.BaseModel):
    amount: int = pydantic.Field(ge=0)
    reason: str
    currency: Literal["EUR", "USD"] = "EUR"


@serde.register
@dataclasses.dataclass
class Approval:
    approved: bool
    note: str | None = None


class Address(typing_extensions.TypedDict):
    city: str
    zip: str


class Destination(typing.TypedDict):  # a typing.TypedDict, which pydantic refuses before 3.12
    address: Address


class Shipping(Destination, total=False):
    express: bool


RATING: dict[str, Any] = {
    "type": "object",
    "properties": {
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["stars"],
    "additionalProperties": False,
}


class State(typing_extensions.TypedDict, total=False):
    got: Any
    kind: str


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def asking(schema: Any, saver: SqliteSaver, seen: list[Any] | None = None):
    """A one-node graph whose node asks with ``schema`` and stores what it got back."""

    def ask(state: State) -> dict[str, Any]:
        answer = interrupt({"question": "fill in the form"}, schema=schema)
        if seen is not None:
            seen.append(answer)
        return {"got": answer, "kind": type(answer).__name__}

    g = StateGraph(State)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver)


@pytest.fixture
def saver(tmp_path: Path):
    with SqliteSaver(str(tmp_path / "hitl.db")) as instance:
        yield instance


def test_the_schema_is_shown_with_the_interrupt_as_json_schema(saver) -> None:
    graph = asking(Refund, saver)
    out = graph.invoke({}, cfg())
    (shown,) = out["__interrupt__"]
    assert shown.value == {"question": "fill in the form"}
    assert shown.schema == Refund.model_json_schema()
    (pending,) = graph.get_state(cfg()).interrupts
    assert pending == shown and pending.schema == shown.schema  # loaded back from SQLite
    assert graph.get_state(cfg()).tasks[0].interrupts[0].schema["required"] == ["amount", "reason"]


def test_a_pydantic_answer_comes_back_as_a_model_instance(saver) -> None:
    seen: list[Any] = []
    graph = asking(Refund, saver, seen)
    graph.invoke({}, cfg())
    out = graph.invoke(Command(resume={"amount": 30, "reason": "broken"}), cfg())
    assert seen == [Refund(amount=30, reason="broken", currency="EUR")]
    assert out["kind"] == "Refund"


def test_a_model_instance_is_accepted_as_an_answer_and_stored_as_json(saver) -> None:
    seen: list[Any] = []
    graph = asking(Refund, saver, seen)
    graph.invoke({}, cfg())
    graph.invoke(Command(resume=Refund(amount=5, reason="late", currency="USD")), cfg())
    assert seen == [Refund(amount=5, reason="late", currency="USD")]


def test_an_invalid_answer_names_the_field_and_changes_nothing(saver) -> None:
    seen: list[Any] = []
    graph = asking(Refund, saver, seen)
    graph.invoke({}, cfg())
    before = graph.get_state(cfg())
    history = list(graph.get_state_history(cfg()))

    with pytest.raises(InvalidAnswerError) as caught:
        graph.invoke(Command(resume={"amount": "ten", "reason": "broken"}), cfg())
    err = caught.value
    assert isinstance(err, InvalidResumeError)
    assert err.field == "amount"
    assert err.interrupt_id == before.interrupts[0].id
    assert "amount: expected integer, got str 'ten'" in str(err)
    assert "still pending" in str(err)

    with pytest.raises(InvalidAnswerError, match=r"amount: must be >= 0, got -1"):
        graph.invoke(Command(resume={"amount": -1, "reason": "x"}), cfg())
    with pytest.raises(InvalidAnswerError, match=r"reason: is required but missing"):
        graph.invoke(Command(resume={"amount": 1}), cfg())
    with pytest.raises(InvalidAnswerError, match=r"currency: must be one of \['EUR', 'USD'\]"):
        graph.invoke(Command(resume={"amount": 1, "reason": "x", "currency": "GBP"}), cfg())

    assert seen == []  # the node never ran again
    assert list(graph.get_state_history(cfg())) == history  # no checkpoint was written
    assert graph.get_state(cfg()) == before  # and no pending write either
    # The interrupt still waits, and a good answer goes through.
    out = graph.invoke(Command(resume={"amount": 1, "reason": "x"}), cfg())
    assert out["got"] == Refund(amount=1, reason="x")


def test_a_dataclass_answer_comes_back_as_a_dataclass_instance(saver) -> None:
    seen: list[Any] = []
    graph = asking(Approval, saver, seen)
    out = graph.invoke({}, cfg())
    assert out["__interrupt__"][0].schema["required"] == ["approved"]
    with pytest.raises(InvalidAnswerError, match=r"approved: expected boolean, got str 'yes'"):
        graph.invoke(Command(resume={"approved": "yes"}), cfg())
    graph.invoke(Command(resume={"approved": True}), cfg())
    assert seen == [Approval(approved=True, note=None)]


def test_a_typeddict_answer_comes_back_as_a_dict(saver) -> None:
    seen: list[Any] = []
    graph = asking(Shipping, saver, seen)
    out = graph.invoke({}, cfg())
    schema = out["__interrupt__"][0].schema
    assert schema["required"] == ["address"]
    assert set(schema["properties"]) == {"address", "express"}
    with pytest.raises(InvalidAnswerError) as caught:
        graph.invoke(Command(resume={"address": {"city": "Lyon"}}), cfg())
    assert caught.value.field == "address.zip"
    graph.invoke(Command(resume={"address": {"city": "Lyon", "zip": "69001"}}), cfg())
    assert seen == [{"address": {"city": "Lyon", "zip": "69001"}}]


def test_a_json_schema_answer_is_checked_and_returned_as_given(saver) -> None:
    seen: list[Any] = []
    graph = asking(RATING, saver, seen)
    out = graph.invoke({}, cfg())
    assert out["__interrupt__"][0].schema == RATING
    with pytest.raises(InvalidAnswerError) as caught:
        graph.invoke(Command(resume={"stars": 9, "tags": ["ok", 3], "extra": 1}), cfg())
    assert [path for path, _ in caught.value.problems] == ["stars", "tags[1]", "extra"]
    assert "extra: is not an allowed field (allowed: stars, tags)" in str(caught.value)
    graph.invoke(Command(resume={"stars": 4, "tags": ["fast"]}), cfg())
    assert seen == [{"stars": 4, "tags": ["fast"]}]


def test_answers_to_several_interrupts_are_each_checked(saver) -> None:
    def first(state: State) -> dict[str, Any]:
        return {"got": interrupt("how many?", schema={"type": "integer"})}

    def second(state: State) -> dict[str, Any]:
        return {"kind": interrupt("which?", schema={"enum": ["a", "b"]})}

    g = StateGraph(State)
    g.add_node("first", first)
    g.add_node("second", second)
    g.add_edge(START, "first")
    g.add_edge(START, "second")
    graph = g.compile(checkpointer=saver)
    out = graph.invoke({}, cfg())
    ids = {i.value: i.id for i in out["__interrupt__"]}
    history = list(graph.get_state_history(cfg()))
    with pytest.raises(InvalidAnswerError, match="must be one of"):
        graph.invoke(Command(resume={ids["how many?"]: 3, ids["which?"]: "c"}), cfg())
    assert list(graph.get_state_history(cfg())) == history  # the valid answer was not kept
    out = graph.invoke(Command(resume={ids["how many?"]: 3, ids["which?"]: "b"}), cfg())
    assert out == {"got": 3, "kind": "b"}


def test_interrupts_without_a_schema_keep_langgraphs_repr(saver) -> None:
    graph = asking(None, saver)
    (shown,) = graph.invoke({}, cfg())["__interrupt__"]
    assert shown.schema is None
    assert repr(shown) == f"Interrupt(value={{'question': 'fill in the form'}}, id='{shown.id}')"
    assert shown == Interrupt(value={"question": "fill in the form"}, id=shown.id)
    out = graph.invoke(Command(resume="anything at all"), cfg())
    assert out["got"] == "anything at all"


def test_a_schema_it_cannot_check_is_refused_when_the_node_asks(saver) -> None:
    graph = asking({"type": "object", "patternProperties": {"^x": {}}}, saver)
    with pytest.raises(InvalidSchemaError, match="'patternProperties'"):
        graph.invoke({}, cfg())
    graph = asking(int, saver)
    with pytest.raises(InvalidSchemaError, match="pydantic model, a dataclass or a TypedDict"):
        graph.invoke({}, cfg("t2"))


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        ({"type": "object", "required": "order"}, r"schema\.required must be a list"),
        ({"type": "object", "properties": ["order"]}, r"schema\.properties must be an object"),
        ({"type": "object", "required": ["a", "a"]}, "unique property names"),
        ({"type": "array", "minItems": -1}, r"schema\.minItems must be a non-negative"),
        ({"type": "string", "pattern": "("}, "a regular expression"),
        ({"anyOf": []}, r"schema\.anyOf must be a non-empty list"),
        (
            {"type": "object", "properties": {"a": {"type": "string", "maxLength": "3"}}},
            r"schema\.properties\.a\.maxLength must be",
        ),
    ],
)
def test_a_malformed_schema_is_refused_naming_what_is_wrong(
    saver: Any, schema: Any, named: str
) -> None:
    """JSON Schema's metaschema refuses these; the checker read ``"required": "order"`` as five
    required fields and raised ``AttributeError`` on ``"properties": ["order"]``."""
    with pytest.raises(InvalidSchemaError, match=named):
        asking(schema, saver).invoke({}, cfg())


def test_an_action_with_a_malformed_args_schema_is_refused() -> None:
    from threadline.hitl import ActionRequest

    with pytest.raises(InvalidSchemaError, match="properties must be an object"):
        ActionRequest(name="refund", args={}, args_schema={"properties": ["order"]})


@serde.register
class Line(pydantic.BaseModel):
    sku: str
    qty: int = pydantic.Field(gt=0)


@serde.register
class Order(pydantic.BaseModel):
    lines: list[Line]
    coupon: str | None = None


def test_nested_models_and_optional_fields_name_the_exact_field(saver) -> None:
    seen: list[Any] = []
    graph = asking(Order, saver, seen)
    graph.invoke({}, cfg())
    bad = {"lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 0}], "coupon": 5}
    with pytest.raises(InvalidAnswerError) as caught:
        graph.invoke(Command(resume=bad), cfg())
    assert caught.value.problems == (
        ("lines[1].qty", "must be > 0, got 0"),
        ("coupon", "expected null or string, got int 5"),
    )
    graph.invoke(Command(resume={"lines": [{"sku": "b", "qty": 2}]}), cfg())
    assert seen == [Order(lines=[Line(sku="b", qty=2)])]


def test_an_interrupt_inside_a_subgraph_is_checked_by_the_parent(saver) -> None:
    inner = asking({"type": "integer", "minimum": 1}, saver=None)  # type: ignore[arg-type]
    parent = StateGraph(State)
    parent.add_node("child", inner)
    parent.add_edge(START, "child")
    graph = parent.compile(checkpointer=saver)
    (shown,) = graph.invoke({}, cfg())["__interrupt__"]
    assert shown.schema == {"type": "integer", "minimum": 1}
    history = list(graph.get_state_history(cfg()))
    with pytest.raises(InvalidAnswerError, match="must be >= 1, got 0"):
        graph.invoke(Command(resume=0), cfg())
    assert list(graph.get_state_history(cfg())) == history
    assert graph.invoke(Command(resume=3), cfg())["got"] == 3


@serde.register
class Booking(pydantic.BaseModel):
    start: int
    end: int

    @pydantic.model_validator(mode="after")
    def ordered(self) -> Booking:
        if self.end <= self.start:
            raise ValueError("end must be after start")
        return self


def test_a_python_only_check_runs_in_the_node(saver) -> None:
    """A model validator has no JSON Schema form: the answer passes the resume check and is
    refused when the node rebuilds the model, as an InvalidAnswerError too."""
    graph = asking(Booking, saver)
    graph.invoke({}, cfg())
    with pytest.raises(InvalidAnswerError, match="end must be after start") as caught:
        graph.invoke(Command(resume={"start": 5, "end": 1}), cfg())
    assert caught.value.problems[0][0] == ""
    assert "answer the interrupt again" in str(caught.value)
    assert len(graph.get_state(cfg()).interrupts) == 1
    out = graph.invoke(Command(resume={"start": 1, "end": 5}), cfg())
    assert out["got"] == Booking(start=1, end=5)
