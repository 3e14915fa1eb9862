"""Without langchain-core: the light classes, in processes that cannot import it.

The message tests are run again in a subprocess that blocks langchain-core (see conftest.py),
and conversations saved by one family load as the other, in both directions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from threadline import END, START, StateGraph
from threadline.checkpoint import SqliteSaver
from threadline.messages import USES_LANGCHAIN, AIMessage, HumanMessage, MessagesState

pytestmark = pytest.mark.skipif(
    not USES_LANGCHAIN, reason="this run already has no langchain-core (or is the subprocess)"
)
HERE = Path(__file__).parent
ROOT = HERE.parents[1]  # subprocesses run here, so that they import this checkout's threadline
BLOCK = "import sys; sys.modules['langchain_core'] = None\n"


def run_blocked(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", BLOCK + textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_message_tests_pass_with_the_light_classes() -> None:
    # test_light_messages.py tests the light classes directly; it need not run twice.
    skip = {Path(__file__).name, "test_light_messages.py"}
    others = sorted(str(p.relative_to(ROOT)) for p in HERE.glob("test_*.py") if p.name not in skip)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *others],
        cwd=ROOT,
        env={**os.environ, "THREADLINE_TEST_BLOCK_LANGCHAIN": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and " failed" not in done.stdout


def test_a_chat_graph_on_sqlite_without_langchain(tmp_path: Path) -> None:
    out = run_blocked(
        f"""
        from threadline import END, START, StateGraph
        from threadline.checkpoint import SqliteSaver
        from threadline.graph import MessagesState
        from threadline.messages import AIMessage, HumanMessage, USES_LANGCHAIN

        def chatbot(state):
            return {{"messages": [AIMessage("echo " + state["messages"][-1].content)]}}

        graph = StateGraph(MessagesState)
        graph.add_node("chatbot", chatbot)
        graph.add_edge(START, "chatbot")
        graph.add_edge("chatbot", END)
        config = {{"configurable": {{"thread_id": "t"}}}}
        with SqliteSaver({str(tmp_path / "light.db")!r}) as saver:
            app = graph.compile(checkpointer=saver)
            app.invoke({{"messages": [("user", "one")]}}, config)
            app.invoke({{"messages": "two"}}, config)
            messages = app.get_state(config).values["messages"]
        print(USES_LANGCHAIN)
        for m in messages:
            print(type(m).__module__, type(m).__name__, m.content, len(m.id))
        """
    )
    light = "threadline.messages.light"
    assert out.splitlines() == [
        "False",
        f"{light} HumanMessage one 36",
        f"{light} AIMessage echo one 36",
        f"{light} HumanMessage two 36",
        f"{light} AIMessage echo two 36",
    ]


USAGE = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
CONFIG = {"configurable": {"thread_id": "t"}}


def chat(saver: SqliteSaver):
    graph = StateGraph(MessagesState)
    graph.add_node("chatbot", lambda s: {"messages": [AIMessage("ok", usage_metadata=USAGE)]})
    graph.add_edge(START, "chatbot")
    graph.add_edge("chatbot", END)
    return graph.compile(checkpointer=saver)


def chat_app_code(path: Path) -> str:
    """Code making ``app``, the app ``chat`` makes, on the SQLite file ``path``."""
    return f"""
        from threadline import END, START, StateGraph
        from threadline.checkpoint import SqliteSaver
        from threadline.messages import AIMessage, HumanMessage, MessagesState
        graph = StateGraph(MessagesState)
        usage = {USAGE!r}
        graph.add_node("chatbot", lambda s: {{"messages": [AIMessage("ok", usage_metadata=usage)]}})
        graph.add_edge(START, "chatbot")
        graph.add_edge("chatbot", END)
        app = graph.compile(checkpointer=SqliteSaver({str(path)!r}))
        """


def test_a_conversation_saved_with_langchain_loads_without_it(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    with SqliteSaver(path) as saver:
        chat(saver).invoke({"messages": [HumanMessage("hi", id="h1", name="ada")]}, CONFIG)
    out = run_blocked(
        chat_app_code(path)
        + f"""
        human, ai = app.get_state({CONFIG!r}).values["messages"]
        assert type(human) is HumanMessage and type(ai) is AIMessage
        print(human.id, human.name, human.content, ai.content, ai.usage_metadata)
        """
    )
    assert out == f"h1 ada hi ok {USAGE}"


def test_a_conversation_saved_without_langchain_loads_with_it(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    run_blocked(
        chat_app_code(path)
        + f"""
        app.invoke({{"messages": [HumanMessage("hi", id="h1", name="ada")]}}, {CONFIG!r})
        """
    )
    with SqliteSaver(path) as saver:
        app = chat(saver)
        human, ai = app.get_state(CONFIG).values["messages"]
        assert human == HumanMessage("hi", id="h1", name="ada")
        assert ai == AIMessage("ok", id=ai.id, usage_metadata=USAGE)
        app.invoke({"messages": "again"}, CONFIG)  # and the conversation goes on
        assert len(app.get_state(CONFIG).values["messages"]) == 4
