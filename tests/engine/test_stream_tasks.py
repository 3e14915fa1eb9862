"""The debug, tasks and checkpoints stream modes as LangGraph 1.x shapes them."""

from __future__ import annotations

import pytest
from small_graphs import State, append, asking, cfg, diamond
from stream_graphs import (
    by_step,
)

from threadline import (
    END,
    START,
    Command,
    Send,
    StateGraph,
)
from threadline.checkpoint.memory import MemorySaver

# ------------------------------------------------------------------ debug


def test_debug_without_a_checkpointer_has_task_events_only():
    events = list(diamond().stream({"items": ["in"]}, stream_mode="debug"))
    assert [(e["type"], e["step"], e["payload"]["name"]) for e in events[:2]] == [
        ("task", 1, "a"),
        ("task_result", 1, "a"),
    ]
    assert all(e["type"] != "checkpoint" for e in events)
    first = events[0]
    assert list(first) == ["step", "timestamp", "type", "payload"]
    assert list(first["payload"]) == ["id", "name", "input", "triggers"]
    assert first["payload"]["input"] == {"items": ["in"]}
    assert first["payload"]["triggers"] == ("branch:to:a",)
    result = events[1]["payload"]
    assert result == {
        "id": first["payload"]["id"],
        "name": "a",
        "error": None,
        "result": {"items": ["a"]},
        "interrupts": [],
    }
    c_result = next(e for e in events if e["type"] == "task_result" and e["payload"]["name"] == "c")
    assert c_result["payload"]["result"] == {}  # a node that returned None


def test_debug_with_a_checkpointer_wraps_every_checkpoint_and_task():
    events = list(
        diamond(checkpointer=MemorySaver()).stream({"items": ["in"]}, cfg(), stream_mode="debug")
    )
    shape = by_step(events)
    assert shape[:4] == [
        ("checkpoint", -1, None),
        ("checkpoint", 0, None),
        ("task", 1, "a"),
        ("task_result", 1, "a"),
    ]
    assert shape[4] == ("checkpoint", 1, None)
    assert shape[-1] == ("checkpoint", 2, None)
    checkpoint = events[1]["payload"]
    assert list(checkpoint) == ["config", "parent_config", "values", "metadata", "next", "tasks"]
    assert checkpoint["next"] == ["a"]
    # the task the checkpoint plans is the task that runs next
    assert checkpoint["tasks"][0]["id"] == events[2]["payload"]["id"]


# ------------------------------------------------------------------ tasks


def test_tasks_mode_yields_start_and_result_of_each_task():
    chunks = list(diamond().stream({"items": ["in"]}, stream_mode="tasks"))
    starts = [c for c in chunks if "triggers" in c]
    results = [c for c in chunks if "result" in c]
    assert [c["name"] for c in starts] == ["a", "b", "c"]
    assert sorted(c["name"] for c in results) == ["a", "b", "c"]
    assert starts[1]["input"] == {"items": ["in", "a"]}
    assert {c["id"] for c in starts} == {c["id"] for c in results}
    assert chunks[0]["name"] == "a" and chunks[1] == {
        "id": chunks[0]["id"],
        "name": "a",
        "error": None,
        "result": {"items": ["a"]},
        "interrupts": [],
    }


def test_task_triggers_name_joins_sends_and_edges_as_langgraph_does():
    def jump(state: State) -> Command:
        return Command(goto="k", update={"items": ["cmd"]})

    g = StateGraph(State)
    for name in ("x", "y", "z", "j", "k"):
        g.add_node(name, append(name))
    g.add_node("w", lambda arg: {"items": [arg]})
    g.add_node("cmd", jump, destinations=["k"])
    g.add_edge(START, "x")
    g.add_edge(START, "y")
    g.add_edge(["x", "y"], "z")
    g.add_conditional_edges("z", lambda s: [Send("w", "s1"), Send("w", "s2")])
    g.add_conditional_edges("w", lambda s: "j", ["j"])
    g.add_edge("j", "cmd")
    g.add_edge("k", END)
    starts = [c for c in g.compile().stream({"items": []}, stream_mode="tasks") if "triggers" in c]
    assert [(c["name"], c["triggers"]) for c in starts] == [
        ("x", ("branch:to:x",)),
        ("y", ("branch:to:y",)),
        ("z", ("branch:to:z", "join:x+y:z")),
        ("w", ("__pregel_push",)),
        ("w", ("__pregel_push",)),
        ("j", ("branch:to:j",)),
        ("cmd", ("branch:to:cmd",)),
        ("k", ("branch:to:k",)),
    ]
    assert [c["input"] for c in starts if c["name"] == "w"] == ["s1", "s2"]


def test_a_failed_task_reports_its_exception_and_an_interrupted_one_its_interrupts():
    def boom(state: State) -> dict:
        raise ValueError("boom")

    g = StateGraph(State)
    g.add_node("boom", boom)
    g.add_edge(START, "boom")
    g.add_edge("boom", END)
    chunks = []
    with pytest.raises(ValueError, match="boom"):
        for chunk in g.compile().stream({"items": []}, stream_mode="tasks"):
            chunks.append(chunk)
    error = chunks[-1]["error"]
    assert isinstance(error, ValueError) and chunks[-1]["result"] == {}

    graph = asking(MemorySaver())
    last = list(graph.stream({"items": []}, cfg(), stream_mode="tasks"))[-1]
    [pending] = graph.get_state(cfg()).interrupts
    assert last["name"] == "ask" and last["result"] == {}
    assert last["interrupts"] == [{"value": "approve?", "id": pending.id}]


def test_tasks_events_carry_the_configs_metadata_and_tags():
    config = {"metadata": {"user": "u1"}, "tags": ["web"]}
    starts = [c for c in diamond().stream({"items": []}, config, stream_mode="tasks")]
    assert starts[0]["metadata"] == {"user": "u1", "tags": ["web"]}
    assert "metadata" not in next(iter(diamond().stream({"items": []}, stream_mode="tasks")))


# ------------------------------------------------------------------ checkpoints


def test_checkpoints_mode_needs_a_checkpointer():
    assert list(diamond().stream({"items": []}, stream_mode="checkpoints")) == []


def test_checkpoints_mode_yields_each_saved_checkpoint(saver):
    graph = diamond(checkpointer=saver)
    chunks = list(graph.stream({"items": ["in"]}, cfg(), stream_mode="checkpoints"))
    history = list(graph.get_state_history(cfg()))[::-1]
    assert [c["config"] for c in chunks] == [
        {
            "configurable": {
                "checkpoint_ns": "",
                "thread_id": "t",
                "checkpoint_id": s.config["configurable"]["checkpoint_id"],
            }
        }
        for s in history
    ]
    assert chunks[0]["parent_config"] is None
    assert [c["parent_config"] for c in chunks[1:]] == [c["config"] for c in chunks[:-1]]
    assert [c["metadata"]["step"] for c in chunks] == [-1, 0, 1, 2]
    assert [c["next"] for c in chunks] == [["__start__"], ["a"], ["b", "c"], []]
    assert chunks[0]["values"] == {"items": []}
    assert chunks[-1]["values"] == {"items": ["in", "a", "b"]}
    assert chunks[2]["tasks"] == [
        {"id": chunks[2]["tasks"][0]["id"], "name": "b", "interrupts": (), "state": None},
        {"id": chunks[2]["tasks"][1]["id"], "name": "c", "interrupts": (), "state": None},
    ]


def test_a_resumed_run_streams_its_state_then_the_checkpoint_it_resumes_with_its_interrupt():
    graph = asking(MemorySaver())
    list(graph.stream({"items": []}, cfg()))
    [pending] = graph.get_state(cfg()).interrupts
    chunks = list(graph.stream(Command(resume="yes"), cfg(), stream_mode=["values", "checkpoints"]))
    assert chunks[0] == ("values", {"items": ["prepare"]})
    mode, resumed = chunks[1]
    assert mode == "checkpoints" and resumed["next"] == ["ask"]
    assert resumed["tasks"][0]["interrupts"] == ({"value": "approve?", "id": pending.id},)
    assert chunks[-2] == ("values", {"items": ["prepare"], "answer": "yes"})


def test_breakpoints_stream_the_checkpoint_they_stop_at():
    g = StateGraph(State)
    g.add_node("a", append("a"))
    g.add_node("b", append("b"))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    for kw in ({"interrupt_before": ["b"]}, {"interrupt_after": ["a"]}):
        graph = g.compile(checkpointer=MemorySaver(), **kw)
        chunks = list(graph.stream({"items": []}, cfg(), stream_mode=["checkpoints", "updates"]))
        assert chunks[-2][0] == "checkpoints" and chunks[-2][1]["next"] == ["b"]
        assert chunks[-1] == ("updates", {"__interrupt__": ()})
