"""request_review: several actions in one interrupt, answered together, in any UI's dialect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typing_extensions

from threadline import END, START, Command, StateGraph
from threadline.checkpoint import SqliteSaver
from threadline.errors import InvalidAnswerError
from threadline.hitl import ActionRequest, Decision, request_review

REFUND_ARGS = {
    "type": "object",
    "properties": {"order": {"type": "string"}, "amount": {"type": "number", "minimum": 0}},
    "required": ["order", "amount"],
    "additionalProperties": False,
}

ACTIONS = [
    ActionRequest(
        "refund", {"order": "A1", "amount": 30}, "Refund order A1", args_schema=REFUND_ARGS
    ),
    ActionRequest("email", {"to": "ada@example.com"}, allowed=("accept", "respond", "reject")),
    ActionRequest("close_ticket", {"id": 7}, allowed=("accept", "reject")),
]


class State(typing_extensions.TypedDict, total=False):
    decisions: list[dict[str, Any]]


def cfg() -> dict[str, Any]:
    return {"configurable": {"thread_id": "review"}}


@pytest.fixture
def graph(tmp_path: Path):
    runs: list[str] = []

    def review(state: State) -> dict[str, Any]:
        runs.append("review")
        decisions = request_review(ACTIONS)
        assert all(isinstance(d, Decision) for d in decisions)
        return {
            "decisions": [{"type": d.type, "args": d.args, "message": d.message} for d in decisions]
        }

    g = StateGraph(State)
    g.add_node("review", review)
    g.add_edge(START, "review")
    g.add_edge("review", END)
    with SqliteSaver(str(tmp_path / "review.db")) as saver:
        compiled = g.compile(checkpointer=saver)
        compiled.runs = runs  # type: ignore[attr-defined]
        yield compiled


def test_one_interrupt_carries_every_action_in_langchains_shape(graph) -> None:
    out = graph.invoke({}, cfg())
    (asked,) = out["__interrupt__"]
    assert asked.value == {
        "action_requests": [
            {
                "name": "refund",
                "args": {"order": "A1", "amount": 30},
                "description": "Refund order A1",
            },
            {"name": "email", "args": {"to": "ada@example.com"}},
            {"name": "close_ticket", "args": {"id": 7}},
        ],
        "review_configs": [
            {
                "action_name": "refund",
                "allowed_decisions": ["accept", "edit", "respond", "reject"],
                "args_schema": REFUND_ARGS,
            },
            {"action_name": "email", "allowed_decisions": ["accept", "respond", "reject"]},
            {"action_name": "close_ticket", "allowed_decisions": ["accept", "reject"]},
        ],
    }
    decisions = asked.schema["properties"]["decisions"]
    assert decisions["minItems"] == decisions["maxItems"] == 3
    assert decisions["prefixItems"][0]["properties"]["args"] == REFUND_ARGS
    assert decisions["prefixItems"][2]["properties"]["type"] == {"enum": ["accept", "reject"]}
    assert graph.get_state(cfg()).interrupts == (asked,)


def test_decisions_come_back_in_order(graph) -> None:
    graph.invoke({}, cfg())
    answer = {
        "decisions": [
            {"type": "edit", "args": {"order": "A1", "amount": 20}},
            {"type": "respond", "message": "Already sent yesterday."},
            {"type": "reject", "message": "Keep it open."},
        ]
    }
    out = graph.invoke(Command(resume=answer), cfg())
    assert out["decisions"] == [
        {"type": "edit", "args": {"order": "A1", "amount": 20}, "message": None},
        {"type": "respond", "args": None, "message": "Already sent yesterday."},
        {"type": "reject", "args": None, "message": "Keep it open."},
    ]
    assert graph.runs == ["review", "review"]


def test_langchain_middleware_answers_are_understood(graph) -> None:
    graph.invoke({}, cfg())
    answer = {
        "decisions": [
            {
                "type": "edit",
                "edited_action": {"name": "refund", "args": {"order": "A1", "amount": 5}},
            },
            {"type": "approve"},
            {"type": "reject"},
        ]
    }
    out = graph.invoke(Command(resume=answer), cfg())
    assert [(d["type"], d["args"]) for d in out["decisions"]] == [
        ("edit", {"order": "A1", "amount": 5}),
        ("accept", None),
        ("reject", None),
    ]


def test_agent_inbox_responses_are_understood(graph) -> None:
    graph.invoke({}, cfg())
    answer = [
        {"type": "accept", "args": {"action": "refund", "args": {"order": "A1", "amount": 30}}},
        {"type": "response", "args": "Use the other address."},
        {"type": "ignore", "args": None},
    ]
    out = graph.invoke(Command(resume=answer), cfg())
    assert out["decisions"] == [
        {"type": "accept", "args": None, "message": None},
        {"type": "respond", "args": None, "message": "Use the other address."},
        {"type": "reject", "args": None, "message": None},
    ]


def test_decision_objects_are_an_answer_too(graph) -> None:
    graph.invoke({}, cfg())
    answer = [Decision("accept"), Decision("reject", message="no"), Decision("accept")]
    out = graph.invoke(Command(resume=answer), cfg())
    assert [d["type"] for d in out["decisions"]] == ["accept", "reject", "accept"]


@pytest.mark.parametrize(
    ("answer", "field", "says"),
    [
        (
            [{"type": "accept"}],
            "decisions",
            "expected 3 decision(s), one per action in order, got 1",
        ),
        (
            [{"type": "accept"}, {"type": "edit", "args": {}}, {"type": "accept"}],
            "decisions[1].type",
            "'edit' is not allowed for action 'email'",
        ),
        (
            [
                {"type": "edit", "args": {"order": "A1", "amount": -3}},
                {"type": "accept"},
                {"type": "accept"},
            ],
            "decisions[0].args.amount",
            "must be >= 0, got -3",
        ),
        (
            [
                {"type": "edit", "args": {"order": "A1", "amout": 3}},
                {"type": "accept"},
                {"type": "accept"},
            ],
            "decisions[0].args.amount",
            "is required but missing",
        ),
        (
            [{"type": "accept"}, {"type": "respond"}, {"type": "accept"}],
            "decisions[1].message",
            "a respond decision needs the text",
        ),
        (
            [{"type": "maybe"}, {"type": "accept"}, {"type": "accept"}],
            "decisions[0].type",
            "unknown decision 'maybe'",
        ),
        (
            [
                {"type": "accept", "args": {"order": "B2", "amount": 30}},
                {"type": "accept"},
                {"type": "accept"},
            ],
            "decisions[0].args",
            "an accept cannot change the arguments",
        ),
        (
            [
                {"type": "edit", "edited_action": {"name": "delete_all", "args": {}}},
                {"type": "accept"},
                {"type": "accept"},
            ],
            "decisions[0].edited_action.name",
            "keep 'refund'",
        ),
        ({"decision": []}, "", "expected {'decisions': [...]} or a list of decisions"),
    ],
)
def test_a_wrong_answer_is_refused_and_changes_nothing(graph, answer, field, says) -> None:
    graph.invoke({}, cfg())
    before = graph.get_state(cfg())
    history = list(graph.get_state_history(cfg()))
    with pytest.raises(InvalidAnswerError) as caught:
        graph.invoke(Command(resume=answer), cfg())
    assert caught.value.field == field
    assert says in str(caught.value)
    assert graph.get_state(cfg()) == before
    assert list(graph.get_state_history(cfg())) == history
    assert graph.runs == ["review"]


def test_one_action_may_be_answered_with_one_decision(tmp_path: Path) -> None:
    def node(state: State) -> dict[str, Any]:
        (decision,) = request_review([ActionRequest("deploy", {"env": "prod"})])
        return {"decisions": [{"type": decision.type, "args": None, "message": decision.message}]}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    with SqliteSaver(str(tmp_path / "one.db")) as saver:
        graph = g.compile(checkpointer=saver)
        graph.invoke({}, cfg())
        out = graph.invoke(Command(resume={"type": "reject", "message": "not on a Friday"}), cfg())
    assert out["decisions"] == [{"type": "reject", "args": None, "message": "not on a Friday"}]


def test_bad_requests_and_decisions_are_refused_where_they_are_made() -> None:
    with pytest.raises(ValueError, match="must name some of"):
        ActionRequest("x", {}, allowed=("accept", "approve"))
    with pytest.raises(TypeError, match="args must be a dict"):
        ActionRequest("x", ["a"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs args"):
        Decision("edit")
    with pytest.raises(ValueError, match="needs message"):
        Decision("respond")
    with pytest.raises(ValueError, match="takes no message"):
        Decision("accept", message="fine")
    assert ActionRequest("x", {}, allowed=["accept"]).allowed == ("accept",)  # type: ignore[arg-type]
