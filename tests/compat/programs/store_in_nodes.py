"""Add memory: long-term memory shared across threads, through the store given to nodes."""

from dataclasses import dataclass

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore


@dataclass
class Context:
    user_id: str


def call_model(state: MessagesState, runtime: Runtime[Context]):
    user_id = runtime.context.user_id
    namespace = ("memories", user_id)
    memories = runtime.store.search(namespace)
    info = "; ".join(d.value["data"] for d in memories)

    last_message = state["messages"][-1]
    if "remember" in last_message.content.lower():
        memory = "User name is Bob"
        runtime.store.put(namespace, str(len(memories)), {"data": memory})

    return {"messages": [AIMessage(f"I know: {info or 'nothing'}")]}


builder = StateGraph(MessagesState, context_schema=Context)
builder.add_node(call_model)
builder.add_edge(START, "call_model")

store = InMemoryStore()
graph = builder.compile(checkpointer=InMemorySaver(), store=store)

config = {"configurable": {"thread_id": "1"}}
for chunk in graph.stream(
    {"messages": [{"role": "user", "content": "Hi! Remember: my name is Bob"}]},
    config,
    stream_mode="values",
    context=Context(user_id="1"),
):
    print(chunk["messages"][-1].type, chunk["messages"][-1].content)

config = {"configurable": {"thread_id": "2"}}
for chunk in graph.stream(
    {"messages": [{"role": "user", "content": "what is my name?"}]},
    config,
    stream_mode="values",
    context=Context(user_id="1"),
):
    print(chunk["messages"][-1].type, chunk["messages"][-1].content)

print([(i.namespace, i.key, i.value) for i in store.search(("memories", "1"))])
