"""Streaming: LLM tokens with stream_mode="messages" (a fake chat model that streams)."""

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

joke_model = GenericFakeChatModel(messages=iter([AIMessage("Why did the ice cream melt?")]))
poem_model = GenericFakeChatModel(messages=iter([AIMessage("Cold sweet dream")]))


class State(TypedDict):
    topic: str
    joke: str
    poem: str


def write_joke(state: State):
    response = joke_model.invoke(
        [{"role": "user", "content": f"Write a joke about {state['topic']}"}]
    )
    return {"joke": response.content}


def write_poem(state: State):
    response = poem_model.invoke(
        [{"role": "user", "content": f"Write a poem about {state['topic']}"}]
    )
    return {"poem": response.content}


graph = (
    StateGraph(State)
    .add_node(write_joke)
    .add_node(write_poem)
    .add_edge(START, "write_joke")
    .add_edge("write_joke", "write_poem")
    .compile()
)

for message_chunk, metadata in graph.stream({"topic": "ice cream"}, stream_mode="messages"):
    if message_chunk.content:
        print(repr(message_chunk.content), metadata["langgraph_node"], metadata["langgraph_step"])
print(type(message_chunk).__name__)
