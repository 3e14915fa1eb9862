"""Add memory: short-term memory with a checkpointer, one conversation per thread id."""

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

model = FakeListChatModel(
    responses=["Hi Bob! Nice to meet you.", "Your name is Bob.", "I don't know your name."]
)


def call_model(state: MessagesState):
    response = model.invoke(state["messages"])
    return {"messages": response}


builder = StateGraph(MessagesState)
builder.add_node(call_model)
builder.add_edge(START, "call_model")

checkpointer = InMemorySaver()
graph = builder.compile(checkpointer=checkpointer)

config = {"configurable": {"thread_id": "1"}}
for chunk in graph.stream(
    {"messages": [{"role": "user", "content": "hi! I'm bob"}]}, config, stream_mode="values"
):
    print(chunk["messages"][-1].type, chunk["messages"][-1].content)

for chunk in graph.stream(
    {"messages": [{"role": "user", "content": "what's my name?"}]}, config, stream_mode="values"
):
    print(chunk["messages"][-1].type, chunk["messages"][-1].content)

other = {"configurable": {"thread_id": "2"}}
result = graph.invoke({"messages": [{"role": "user", "content": "what's my name?"}]}, other)
print([(m.type, m.content) for m in result["messages"]])
print(len(graph.get_state(config).values["messages"]))
