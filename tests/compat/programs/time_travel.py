"""Time travel: run, find a checkpoint in the history, edit it with update_state, resume there."""

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import NotRequired, TypedDict

llm = FakeListChatModel(
    responses=[
        "Sock Dreams",
        "Why did the sock go to therapy? It felt worn out.",
        "Why do chickens hate socks? They always get caught in the coop.",
    ]
)


class State(TypedDict):
    topic: NotRequired[str]
    joke: NotRequired[str]


def generate_topic(state: State):
    msg = llm.invoke("Give me a funny topic for a joke")
    return {"topic": msg.content}


def write_joke(state: State):
    msg = llm.invoke(f"Write a short joke about {state['topic']}")
    return {"joke": msg.content}


workflow = StateGraph(State)
workflow.add_node("generate_topic", generate_topic)
workflow.add_node("write_joke", write_joke)
workflow.add_edge(START, "generate_topic")
workflow.add_edge("generate_topic", "write_joke")
workflow.add_edge("write_joke", END)

checkpointer = InMemorySaver()
graph = workflow.compile(checkpointer=checkpointer)

config = {"configurable": {"thread_id": "joke-thread"}}
state = graph.invoke({}, config)
print(state["topic"])
print()
print(state["joke"])

states = list(graph.get_state_history(config))
for state in states:
    print(state.next)
    print(state.metadata["step"], state.metadata["source"])
    print()

selected_state = states[1]
print(selected_state.next)
print(selected_state.values)

new_config = graph.update_state(selected_state.config, values={"topic": "chickens"})
print(graph.get_state(new_config).next)
print(graph.get_state(new_config).metadata["source"])

result = graph.invoke(None, new_config)
print(result)
print(len(list(graph.get_state_history(config))))
print(graph.get_state(config).values)
