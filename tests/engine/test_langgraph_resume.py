"""Resuming as in LangGraph: ``Command(resume=..., update=..., goto=...)``, what finished
siblings wrote, and ``version='v2'`` outputs with their interrupts apart.
"""

from __future__ import annotations

import asyncio

import pytest
from langgraph_graphs import (
    DraftState,
    Log,
    Review,
    asking_graph,
    cfg,
)

from threadline import END, START, Command, GraphOutput, StateGraph, interrupt
from threadline.checkpoint import InMemorySaver
from threadline.errors import (
    ConfigError,
    InvalidResumeError,
    InvalidUpdateError,
)


def review_graph(saver, runs: list[str] | None = None):
    def review(state: Review) -> dict:
        if runs is not None:
            runs.append(state["reviewer"])
        verdict = interrupt({"draft": state["draft"]})
        return {"reviewer": "done", "log": [f"{state['reviewer']}: {verdict}"]}

    builder = StateGraph(Review)
    builder.add_node("review", review)
    builder.add_node("publish", lambda s: {"log": ["published"]})
    builder.add_edge(START, "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver)


def test_resume_with_an_update_applies_it_before_the_node_runs_again(saver):
    graph = review_graph(saver)
    graph.invoke({"draft": "v1", "reviewer": "ann", "log": []}, cfg())

    out = graph.invoke(Command(resume="ok", update={"reviewer": "bob", "log": ["u"]}), cfg())

    # the node saw the update; its own write of the same key wins, as in LangGraph
    assert out == {"draft": "v1", "reviewer": "done", "log": ["u", "bob: ok"]}
    assert graph.get_state(cfg()).next == ()


def test_an_update_alone_reruns_the_waiting_node_and_is_kept_until_it_is_answered(saver):
    runs: list[str] = []
    graph = review_graph(saver, runs)
    graph.invoke({"draft": "v1", "reviewer": "ann", "log": []}, cfg())
    history = len(list(graph.get_state_history(cfg())))

    out = graph.invoke(Command(update={"reviewer": "zed"}), cfg())

    assert out["reviewer"] == "zed" and len(out["__interrupt__"]) == 1
    state = graph.get_state(cfg())
    assert state.values["reviewer"] == "zed" and state.next == ("review",)
    assert len(list(graph.get_state_history(cfg()))) == history  # no checkpoint of its own
    assert graph.invoke(Command(resume="y"), cfg())["log"] == ["zed: y"]
    assert runs == ["ann", "zed", "zed"]


def test_resume_with_goto_adds_the_target_to_the_step():
    graph = review_graph(InMemorySaver())
    graph.invoke({"draft": "v1", "reviewer": "ann", "log": []}, cfg())
    out = graph.invoke(Command(resume="ok", goto="publish"), cfg())
    assert out["log"] == ["ann: ok", "published"]
    with pytest.raises(InvalidUpdateError, match=r"goto='nowhere'\) names no node"):
        graph.invoke(Command(goto="nowhere"), cfg())


def test_a_command_with_nothing_in_it_or_for_a_parent_is_refused():
    graph = review_graph(InMemorySaver())
    graph.invoke({"draft": "v1", "reviewer": "ann", "log": []}, cfg())
    with pytest.raises(InvalidResumeError, match="no resume value, update or goto"):
        graph.invoke(Command(), cfg())
    with pytest.raises(InvalidUpdateError, match="no parent graph"):
        graph.invoke(Command(graph=Command.PARENT, update={"draft": "x"}), cfg())


# ------------------------------------------------------------------ get_state after a failed step
def test_get_state_shows_what_the_finished_siblings_of_a_failed_task_wrote(saver):
    def steady(state: Log) -> dict:
        return {"log": ["steady"]}

    def flaky(state: Log) -> dict:
        raise ConnectionError("service unavailable")

    builder = StateGraph(Log)
    builder.add_node("steady", steady)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "steady")
    builder.add_edge(START, "flaky")
    graph = builder.compile(checkpointer=saver)
    with pytest.raises(ConnectionError):
        graph.invoke({"log": []}, cfg())

    state = graph.get_state(cfg())
    assert state.values == {"log": ["steady"]}  # live: the sibling's write is shown
    assert state.next == ("flaky",)
    errors = {t.name: t.error for t in state.tasks}
    assert errors == {"flaky": "ConnectionError: service unavailable", "steady": None}
    # addressed by id, the checkpoint shows the values its step started from
    assert graph.get_state(state.config).values == {"log": []}
    assert next(iter(graph.get_state_history(cfg()))).values == {"log": []}


def test_a_run_stopped_at_an_interrupt_returns_what_the_finished_siblings_wrote():
    def ask(state: Log) -> dict:
        return {"log": [f"b {interrupt('q')}"]}

    builder = StateGraph(Log)
    builder.add_node("ask", ask)
    builder.add_node("quick", lambda s: {"log": ["c"]})
    builder.add_edge(START, "ask")
    builder.add_edge(START, "quick")
    graph = builder.compile(checkpointer=InMemorySaver())

    out = graph.invoke({"log": ["i"]}, cfg())
    assert out["log"] == ["i", "c"] and len(out["__interrupt__"]) == 1
    # running the step again re-asks; "quick" does not run again but its write still shows
    chunks = list(graph.stream(None, cfg(), stream_mode="values"))
    assert chunks[0] == {"log": ["i"]} and "__interrupt__" in chunks[1]
    assert chunks[-1] == {"log": ["i", "c"]}
    assert graph.invoke(Command(resume="y"), cfg())["log"] == ["i", "b y", "c"]


def test_invoke_v2_returns_the_output_and_the_interrupts_apart():
    graph = asking_graph()
    output = graph.invoke({"draft": "v1"}, cfg(), version="v2")
    assert isinstance(output, GraphOutput)
    assert output.value == {"draft": "v1", "log": []}
    assert [i.value for i in output.interrupts] == ["who?"]

    done = asyncio.run(graph.ainvoke(Command(resume="ann"), cfg(), version="v2"))
    assert done == GraphOutput({"draft": "v1", "reviewer": "ann", "log": []}, ())
    with pytest.warns(DeprecationWarning):
        assert done["reviewer"] == "ann" and "__interrupt__" not in done

    parts = graph.invoke({"draft": "v2"}, cfg("u"), stream_mode="updates", version="v2")
    assert parts[-1]["type"] == "updates" and "__interrupt__" in parts[-1]["data"]
    with pytest.raises(ConfigError, match="version must be one of"):
        graph.invoke({"draft": "v1"}, cfg(), version="v3")


def test_v2_outputs_of_a_dataclass_state_are_instances_of_it():
    graph = asking_graph(DraftState)
    output = graph.invoke({"draft": "v1"}, cfg(), version="v2")
    assert output.value == DraftState(draft="v1", reviewer="")
    parts = list(graph.stream(Command(resume="bob"), cfg(), stream_mode="values", version="v2"))
    assert parts[-1] == {
        "type": "values",
        "ns": (),
        "data": DraftState(draft="v1", reviewer="bob"),
        "interrupts": (),
    }
    assert graph.invoke({"draft": "v2"}, cfg("v1"))["draft"] == "v2"  # v1 stays a dict
