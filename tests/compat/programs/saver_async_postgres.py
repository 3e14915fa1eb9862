"""Checkpointer libraries: AsyncPostgresSaver.from_conn_string, await setup(), ainvoke."""

import asyncio
import os
import uuid

from langchain_core.messages import AIMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, MessagesState, StateGraph

DB_URI = os.environ.get("THREADLINE_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")


async def reply(state: MessagesState):
    return {"messages": [AIMessage(f"you said: {state['messages'][-1].content}")]}


builder = StateGraph(MessagesState)
builder.add_node(reply)
builder.add_edge(START, "reply")
builder.add_edge("reply", END)


async def main():
    thread_id = f"compat-{uuid.uuid4()}"
    async with AsyncPostgresSaver.from_conn_string(DB_URI) as checkpointer:
        await checkpointer.setup()
        graph = builder.compile(checkpointer=checkpointer)
        config = {"configurable": {"thread_id": thread_id}}
        try:
            for text in ["hi", "how are you?"]:
                result = await graph.ainvoke(
                    {"messages": [{"role": "user", "content": text}]}, config
                )
                print([(m.type, m.content) for m in result["messages"]])
            state = await graph.aget_state(config)
            print(len(state.values["messages"]), state.metadata["step"])
        finally:
            await checkpointer.adelete_thread(thread_id)


asyncio.run(main())
