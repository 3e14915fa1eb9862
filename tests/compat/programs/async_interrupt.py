"""Async: an interrupt in an async node, resumed with ainvoke, watched with astream."""

import asyncio

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    order: str
    confirmed: bool


async def confirm(state: State):
    await asyncio.sleep(0)
    answer = interrupt(f"confirm {state['order']}?")
    return {"confirmed": answer == "yes"}


async def ship(state: State):
    return {"order": state["order"] + " (shipped)" if state["confirmed"] else state["order"]}


builder = StateGraph(State)
builder.add_node(confirm)
builder.add_node(ship)
builder.add_edge(START, "confirm")
builder.add_edge("confirm", "ship")
builder.add_edge("ship", END)
graph = builder.compile(checkpointer=InMemorySaver())


async def main():
    config = {"configurable": {"thread_id": "1"}}
    async for chunk in graph.astream({"order": "books", "confirmed": False}, config):
        if "__interrupt__" in chunk:
            print("interrupt:", chunk["__interrupt__"][0].value)
        else:
            print(chunk)
    print((await graph.aget_state(config)).next)
    print(await graph.ainvoke(Command(resume="yes"), config))


asyncio.run(main())
