"""Subgraphs: a subgraph with its own input and output schemas, added as a node."""

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class ResearchInput(TypedDict):
    question: str


class ResearchOutput(TypedDict):
    findings: str


class ResearchState(ResearchInput, ResearchOutput):
    notes: str


def gather(state: ResearchInput):
    return {"notes": f"notes on {state['question']}"}


def conclude(state: ResearchState):
    return {"findings": state["notes"].upper()}


research = StateGraph(ResearchState, input_schema=ResearchInput, output_schema=ResearchOutput)
research.add_node(gather)
research.add_node(conclude)
research.add_edge(START, "gather")
research.add_edge("gather", "conclude")
research.add_edge("conclude", END)
research_graph = research.compile()
print(research_graph.invoke({"question": "owls"}))


class ParentState(TypedDict):
    question: str
    findings: str
    report: str


def write_report(state: ParentState):
    return {"report": f"Q: {state['question']} / A: {state['findings']}"}


parent = StateGraph(ParentState)
parent.add_node("research", research_graph)
parent.add_node(write_report)
parent.add_edge(START, "research")
parent.add_edge("research", "write_report")
parent.add_edge("write_report", END)
graph = parent.compile()
print(graph.invoke({"question": "bats"}))
for chunk in graph.stream({"question": "bats"}, subgraphs=True):
    print(tuple(p.split(":")[0] for p in chunk[0]), chunk[1])
