"""Add memory: summarize a conversation and trim it, keeping a summary key in the state."""

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

model = FakeListChatModel(responses=["answer one", "answer two", "SUMMARY: bob asked twice", "a3"])


class State(MessagesState):
    summary: str


def call_model(state: State):
    summary = state.get("summary", "")
    messages = state["messages"]
    if summary:
        messages = [HumanMessage(f"Summary of conversation earlier: {summary}")] + messages
    return {"messages": [model.invoke(messages)]}


def should_continue(state: State):
    if len(state["messages"]) > 3:
        return "summarize_conversation"
    return END


def summarize_conversation(state: State):
    response = model.invoke(state["messages"] + [HumanMessage("Create a summary")])
    delete_messages = [RemoveMessage(id=m.id) for m in state["messages"][:-2]]
    return {"summary": response.content, "messages": delete_messages}


workflow = StateGraph(State)
workflow.add_node("conversation", call_model)
workflow.add_node(summarize_conversation)
workflow.add_edge(START, "conversation")
workflow.add_conditional_edges("conversation", should_continue)
workflow.add_edge("summarize_conversation", END)
app = workflow.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "4"}}
for text in ["hi! I'm bob", "what's my name?", "i like the celtics!"]:
    for event in app.stream({"messages": [HumanMessage(text)]}, config, stream_mode="updates"):
        for node, update in event.items():
            print(node, sorted(update))
values = app.get_state(config).values
print(values.get("summary"))
print([(m.type, m.content) for m in values["messages"]])
