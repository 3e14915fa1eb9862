"""Streaming: filter LLM tokens by tags and by node in stream_mode="messages"."""

from itertools import cycle

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

joke_model = GenericFakeChatModel(
    messages=cycle([AIMessage("A cat walks into a bar")]), tags=["joke"]
)
poem_model = GenericFakeChatModel(
    messages=cycle([AIMessage("Whiskers in moonlight")]), tags=["poem"]
)


class State(TypedDict):
    topic: str
    joke: str
    poem: str


def call_model(state: State):
    joke = joke_model.invoke([{"role": "user", "content": f"Write a joke about {state['topic']}"}])
    poem = poem_model.invoke([{"role": "user", "content": f"Write a poem about {state['topic']}"}])
    return {"joke": joke.content, "poem": poem.content}


def write_title(state: State):
    return {"topic": state["topic"].title()}


graph = (
    StateGraph(State)
    .add_node(call_model)
    .add_node(write_title)
    .add_edge(START, "call_model")
    .add_edge("call_model", "write_title")
    .compile()
)

for msg, metadata in graph.stream({"topic": "cats"}, stream_mode="messages"):
    if metadata["tags"] == ["joke"]:
        print("joke token:", repr(msg.content))

for msg, metadata in graph.stream({"topic": "cats"}, stream_mode="messages"):
    if msg.content and metadata["langgraph_node"] == "call_model" and "poem" in metadata["tags"]:
        print("poem token:", repr(msg.content))
print(graph.invoke({"topic": "cats"}))
