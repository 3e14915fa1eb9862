"""What a newcomer from LangGraph reaches for: types shipped (``py.typed``), a licence file,
``BaseCheckpointSaver`` and Agent Inbox's interrupt shapes at LangGraph's paths."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import TypedDict, get_type_hints

from threadline import START, StateGraph, interrupt
from threadline.checkpoint.base import BaseCheckpointSaver, BaseSaver
from threadline.checkpoint.memory import InMemorySaver
from threadline.prebuilt.interrupt import (
    ActionRequest,
    HumanInterrupt,
    HumanInterruptConfig,
    HumanResponse,
)
from threadline.types import Command

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_says_it_is_typed_and_ships_its_licence():
    assert (resources.files("threadline") / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["threadline"]
    assert project["project"]["license"] == "MIT"
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License") and project["project"]["license-files"] == ["LICENSE"]


def test_base_checkpoint_saver_is_the_savers_base():
    assert BaseCheckpointSaver is BaseSaver
    assert isinstance(InMemorySaver(), BaseCheckpointSaver)


class State(TypedDict):
    decision: str


def test_an_agent_inbox_request_and_answer_round_trip():
    def review(state: State) -> dict:
        request: HumanInterrupt = {
            "action_request": ActionRequest(action="refund", args={"amount": 30}),
            "config": HumanInterruptConfig(
                allow_ignore=True, allow_respond=True, allow_edit=True, allow_accept=True
            ),
            "description": "Refund 30?",
        }
        response: HumanResponse = interrupt([request])[0]
        return {"decision": response["type"]}

    g = StateGraph(State)
    g.add_node("review", review)
    g.add_edge(START, "review")
    graph = g.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    stopped = graph.invoke({"decision": ""}, config)
    (asked,) = stopped["__interrupt__"]
    assert asked.value[0]["action_request"] == {"action": "refund", "args": {"amount": 30}}
    answer: HumanResponse = {"type": "accept", "args": None}
    assert graph.invoke(Command(resume=[answer]), config) == {"decision": "accept"}
    assert set(get_type_hints(HumanResponse)) == {"type", "args"}
    assert set(get_type_hints(HumanInterrupt)) == {"action_request", "config", "description"}
