"""Async: async nodes, ainvoke and astream."""

import asyncio
import operator
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    log: Annotated[list[str], operator.add]


async def fetch(state: State):
    await asyncio.sleep(0.01)
    return {"log": ["fetched"]}


def parse(state: State):
    return {"log": ["parsed"]}


async def store_result(state: State):
    return {"log": [f"stored {len(state['log'])}"]}


builder = StateGraph(State)
builder.add_node(fetch)
builder.add_node(parse)
builder.add_node(store_result)
builder.add_edge(START, "fetch")
builder.add_edge("fetch", "parse")
builder.add_edge("parse", "store_result")
builder.add_edge("store_result", END)
graph = builder.compile(checkpointer=InMemorySaver())


async def main():
    config = {"configurable": {"thread_id": "1"}}
    print(await graph.ainvoke({"log": []}, config))
    async for chunk in graph.astream({"log": ["again"]}, {"configurable": {"thread_id": "2"}}):
        print(chunk)
    state = await graph.aget_state(config)
    print(state.values, state.next)
    print(len([s async for s in graph.aget_state_history(config)]))
    try:
        graph.invoke({"log": []}, {"configurable": {"thread_id": "3"}})
    except TypeError:
        print("sync invoke of async nodes: TypeError")


asyncio.run(main())
