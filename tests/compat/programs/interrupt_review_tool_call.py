"""Human-in-the-loop: review a tool call before running it (approve, edit, or reply instead)."""

from typing import Literal

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt


def call_llm(state: MessagesState):
    return {
        "messages": [
            AIMessage(
                "",
                id="ai-1",
                tool_calls=[
                    {"name": "book_hotel", "args": {"hotel": "McKittrick"}, "id": "call_1"}
                ],
            )
        ]
    }


def human_review_node(state: MessagesState) -> Command[Literal["call_tool", "__end__"]]:
    last_message = state["messages"][-1]
    tool_call = last_message.tool_calls[-1]
    review = interrupt({"question": "Is this correct?", "tool_call": tool_call})
    if review["action"] == "continue":
        return Command(goto="call_tool")
    if review["action"] == "update":
        updated_message = AIMessage(
            "",
            id=last_message.id,
            tool_calls=[{"id": tool_call["id"], "name": tool_call["name"], "args": review["data"]}],
        )
        return Command(goto="call_tool", update={"messages": [updated_message]})
    tool_message = ToolMessage(review["data"], name=tool_call["name"], tool_call_id=tool_call["id"])
    return Command(goto=END, update={"messages": [tool_message]})


def call_tool(state: MessagesState):
    tool_call = state["messages"][-1].tool_calls[-1]
    result = f"Booked a stay at {tool_call['args']['hotel']}."
    return {"messages": [ToolMessage(result, tool_call_id=tool_call["id"])]}


builder = StateGraph(MessagesState)
builder.add_node(call_llm)
builder.add_node(human_review_node)
builder.add_node(call_tool)
builder.add_edge(START, "call_llm")
builder.add_edge("call_llm", "human_review_node")
builder.add_edge("call_tool", END)
graph = builder.compile(checkpointer=InMemorySaver())

reviews = {
    "1": {"action": "continue"},
    "2": {"action": "update", "data": {"hotel": "Sheraton"}},
    "3": {"action": "feedback", "data": "User asked not to book anything."},
}
for thread_id, review in reviews.items():
    config = {"configurable": {"thread_id": thread_id}}
    result = graph.invoke({"messages": [{"role": "user", "content": "book a hotel"}]}, config)
    print(result["__interrupt__"][0].value["tool_call"]["args"])
    result = graph.invoke(Command(resume=review), config)
    print([(m.type, m.content) for m in result["messages"]])
    print(len(result["messages"]), result["messages"][1].tool_calls[0]["args"])
