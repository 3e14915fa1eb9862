"""create_agent with OpenAIChatModel against a real local chat-completions server: the tools
offered, a reviewed call rejected, and what the model is sent afterwards."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest

from threadline import Command
from threadline.checkpoint import SqliteSaver
from threadline.prebuilt import InjectedState, create_agent

pytest.importorskip("httpx")
sys.path.insert(0, str(Path(__file__).parents[1] / "models"))
from chat_server import ChatServer, completion

from threadline.models import OpenAIChatModel

CONFIG = {"configurable": {"thread_id": "http"}}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as running:
        yield running


def refund(order: str, amount: float, state: Annotated[dict, InjectedState]) -> str:
    """Refund an order."""
    raise AssertionError("a rejected refund must not run")


def test_a_rejected_call_reaches_the_model_as_its_tool_result(
    server: ChatServer, tmp_path: Path
) -> None:
    call = {"id": "call_1", "name": "refund", "arguments": '{"order": "A1", "amount": 30}'}
    server.script(
        completion("", tool_calls=[call], id="c-1"), completion("Sorry, no refund.", id="c-2")
    )
    model = OpenAIChatModel(model="test-model", base_url=server.base_url, max_retries=0)
    with SqliteSaver(tmp_path / "a.db") as saver:
        agent = create_agent(
            model, [refund], system_prompt="Be kind.", checkpointer=saver, review={"refund": True}
        )
        agent.invoke({"messages": [("user", "refund A1")]}, CONFIG)
        resume = {"decisions": [{"type": "reject", "message": "policy"}]}
        result = agent.invoke(Command(resume=resume), CONFIG)
    assert result["messages"][-1].content == "Sorry, no refund."
    offered = server.bodies[0]["tools"][0]["function"]
    assert offered["name"] == "refund"
    assert sorted(offered["parameters"]["properties"]) == ["amount", "order"]
    sent: list[dict[str, Any]] = server.bodies[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[2]["tool_calls"][0]["id"] == "call_1"
    assert sent[3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "User rejected the tool call for `refund` with reason: policy",
    }
