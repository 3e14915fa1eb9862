"""Messages are found where LangGraph users look for them, and cost nothing until used."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import threadline
import threadline.graph
import threadline.messages
from threadline.messages import USES_LANGCHAIN


def test_the_names_langgraph_graph_exports() -> None:
    from threadline.graph import END, START, Command, MessagesState, StateGraph, add_messages

    assert (START, END) == (threadline.START, threadline.END)
    assert Command is threadline.Command and StateGraph is threadline.StateGraph
    assert add_messages is threadline.messages.add_messages
    assert MessagesState is threadline.messages.MessagesState
    assert set(threadline.graph.__all__) >= {"MessagesState", "add_messages", "StateGraph"}


def test_the_names_langgraph_graph_message_exports() -> None:
    from threadline.graph.message import REMOVE_ALL_MESSAGES, MessagesState, add_messages

    assert add_messages is threadline.add_messages is threadline.messages.add_messages
    assert MessagesState is threadline.MessagesState
    assert REMOVE_ALL_MESSAGES == threadline.REMOVE_ALL_MESSAGES == "__remove_all__"


def test_an_unknown_attribute_is_still_an_attribute_error() -> None:
    for module in (threadline, threadline.graph):
        try:
            module.NoSuchThing  # noqa: B018
        except AttributeError as exc:
            assert "NoSuchThing" in str(exc)
        else:
            raise AssertionError("no AttributeError")


def test_message_classes_are_langchain_cores_when_it_is_installed() -> None:
    names = ["AIMessage", "AIMessageChunk", "BaseMessage", "HumanMessage", "RemoveMessage"]
    names += ["SystemMessage", "ToolMessage", "AnyMessage", "BaseMessageChunk"]
    if USES_LANGCHAIN:
        import langchain_core.messages as lc

        for name in names:
            assert getattr(threadline.messages, name) is getattr(lc, name), name
    else:
        from threadline.messages import light

        for name in names:
            assert getattr(threadline.messages, name) is getattr(light, name), name


def run(code: str) -> str:
    """Run ``code`` in a new interpreter (blocking langchain-core if this run has no langchain)."""
    prelude = "import sys; sys.modules['langchain_core'] = None\n" if not USES_LANGCHAIN else ""
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=Path(__file__).parents[2],  # this checkout's threadline
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_langchain_is_imported_only_when_messages_are_used() -> None:
    out = run(
        """
        import sys
        import threadline
        from threadline import END, START, StateGraph, serde
        from threadline.checkpoint import InMemorySaver
        from typing import TypedDict

        class S(TypedDict):
            n: int

        g = StateGraph(S)
        g.add_node("inc", lambda s: {"n": s["n"] + 1})
        g.add_edge(START, "inc")
        g.add_edge("inc", END)
        app = g.compile(checkpointer=InMemorySaver())
        app.invoke({"n": 1}, {"configurable": {"thread_id": "t"}})
        serde.loads(serde.dumps({"plain": [1, (2, 3)]}))
        print(sys.modules.get("langchain_core") is not None)
        from threadline import add_messages
        print(sys.modules.get("langchain_core") is not None)
        """
    )
    expected = ["False", "True" if USES_LANGCHAIN else "False"]
    assert out.splitlines() == expected


def test_loading_a_stored_message_imports_the_classes_it_needs() -> None:
    blob = threadline.serde.dumps([threadline.messages.HumanMessage("hi", id="1")])
    out = run(
        f"""
        import sys
        from threadline import serde
        print("threadline.messages" in sys.modules)
        (message,) = serde.loads({blob!r})
        print(type(message).__module__, message.content, message.id)
        """
    )
    module = "langchain_core.messages.human" if USES_LANGCHAIN else "threadline.messages.light"
    assert out.splitlines() == ["False", f"{module} hi 1"]
