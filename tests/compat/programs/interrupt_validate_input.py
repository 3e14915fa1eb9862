"""Human-in-the-loop: validate human input, asking again in a loop inside one node."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

runs = []


class State(TypedDict):
    age: int


def get_valid_age(state: State) -> State:
    runs.append("get_valid_age")
    prompt = "Please enter your age (must be a non-negative integer)."
    while True:
        user_input = interrupt(prompt)
        try:
            age = int(user_input)
            if age < 0:
                raise ValueError("Age must be non-negative.")
            break
        except (ValueError, TypeError):
            prompt = f"'{user_input}' is not valid. Please enter a non-negative integer for age."
    return {"age": age}


def report_age(state: State) -> State:
    print(f"✅ Human is {state['age']} years old.")
    return state


builder = StateGraph(State)
builder.add_node("get_valid_age", get_valid_age)
builder.add_node("report_age", report_age)
builder.set_entry_point("get_valid_age")
builder.add_edge("get_valid_age", "report_age")
builder.add_edge("report_age", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "thread-1"}}
result = graph.invoke({}, config=config)
print(result["__interrupt__"][0].value)

result = graph.invoke(Command(resume="not a number"), config=config)
print(result["__interrupt__"][0].value)

result = graph.invoke(Command(resume="-10"), config=config)
print(result["__interrupt__"][0].value)

final_result = graph.invoke(Command(resume="25"), config=config)
print(final_result)
print(len(runs))
