"""Checkpointer libraries: AsyncSqliteSaver.from_conn_string with ainvoke."""

import asyncio
import tempfile
from pathlib import Path

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    count: int


async def increment(state: State):
    return {"count": state["count"] + 1}


builder = StateGraph(State)
builder.add_node(increment)
builder.add_edge(START, "increment")
builder.add_edge("increment", END)


async def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "checkpoints.sqlite")
        async with AsyncSqliteSaver.from_conn_string(path) as checkpointer:
            graph = builder.compile(checkpointer=checkpointer)
            config = {"configurable": {"thread_id": "1"}}
            print(await graph.ainvoke({"count": 0}, config))
            print(await graph.ainvoke({"count": 10}, config))
            state = await graph.aget_state(config)
            print(state.values, state.metadata["step"])
            print(len([s async for s in graph.aget_state_history(config)]))


asyncio.run(main())
