"""Checkpointer libraries: PostgresSaver.from_conn_string, setup(), then a conversation."""

import operator
import os
import uuid
from typing import Annotated

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

DB_URI = os.environ.get("THREADLINE_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")


class State(TypedDict):
    turns: Annotated[list[str], operator.add]


def ask(state: State):
    return {"turns": [interrupt("your turn?")]}


def reply(state: State):
    return {"turns": [f"reply to {state['turns'][-1]}"]}


builder = StateGraph(State)
builder.add_node(ask)
builder.add_node(reply)
builder.add_edge(START, "ask")
builder.add_edge("ask", "reply")
builder.add_edge("reply", END)

thread_id = f"compat-{uuid.uuid4()}"
with PostgresSaver.from_conn_string(DB_URI) as checkpointer:
    checkpointer.setup()
    graph = builder.compile(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": thread_id}}
    try:
        result = graph.invoke({"turns": ["start"]}, config)
        print([i.value for i in result["__interrupt__"]])
        print(graph.invoke(Command(resume="hello"), config))
        history = list(graph.get_state_history(config))
        print(len(history))
        print([(s.metadata["source"], s.metadata["step"], s.next) for s in history])
        print(graph.get_state(config).values)
    finally:
        checkpointer.delete_thread(thread_id)
    print(list(checkpointer.list(config)))
