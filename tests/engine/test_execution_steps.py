"""Supersteps: parallel nodes see the state as the step began, reducers apply in a fixed order,
conflicting writes are errors, join edges wait for all their sources.
"""

from __future__ import annotations

import threading

import pytest
from execution_graphs import (
    State,
    append,
    cfg,
)

from threadline import (
    END,
    START,
    Send,
    StateGraph,
)
from threadline.errors import InvalidUpdateError


def wait(event: threading.Event) -> None:
    """Block until ``event`` is set; fail the node (not the test run) if it never is."""
    if not event.wait(timeout=5):
        raise AssertionError("waited 5 s for a sibling that never came: tasks ran one by one")


# ------------------------------------------------------------------ supersteps


def test_parallel_nodes_see_the_state_as_the_step_began(saver):
    a_done = threading.Event()

    def writer(state: State) -> dict:
        a_done.set()
        return {"value": "from writer"}

    def reader(state: State) -> dict:
        wait(a_done)  # the writer has run; its write must still be invisible in this step
        return {"seen": state.get("value", "<unset>")}

    def later(state: State) -> dict:
        return {"log": [f"later saw {state['value']}"]}

    g = StateGraph(State)
    g.add_node("writer", writer)
    g.add_node("reader", reader)
    g.add_node("later", later)
    g.add_edge(START, "writer")
    g.add_edge(START, "reader")
    g.add_edge("writer", "later")
    g.add_edge("reader", END)
    g.add_edge("later", END)
    out = g.compile(checkpointer=saver).invoke({"value": "initial", "log": []}, cfg())
    assert out["seen"] == "initial"
    assert out["log"] == ["later saw from writer"]
    assert out["value"] == "from writer"


def test_nodes_of_one_step_run_concurrently():
    barrier = threading.Barrier(2, timeout=5)

    def meet(name: str):
        def node(state: State) -> dict:
            barrier.wait()  # only returns once both nodes are inside at the same time
            return {"log": [name]}

        return node

    g = StateGraph(State)
    g.add_node("left", meet("left"))
    g.add_node("right", meet("right"))
    g.add_edge(START, "left")
    g.add_edge(START, "right")
    g.add_edge("left", END)
    g.add_edge("right", END)
    assert sorted(g.compile().invoke({"log": []})["log"]) == ["left", "right"]


def test_many_send_branches_that_block_all_run_at_the_same_time():
    # Threads join a step as its tasks need them; blocked branches must never wait their turn.
    width = 50
    barrier = threading.Barrier(width, timeout=10)

    def work(arg: dict) -> dict:
        barrier.wait()  # returns only once every branch is inside at the same time
        return {"log": [arg["i"]]}

    g = StateGraph(State)
    g.add_node("work", work)
    g.add_conditional_edges(START, lambda s: [Send("work", {"i": i}) for i in range(width)])
    g.add_edge("work", END)
    assert g.compile().invoke({"log": []})["log"] == list(range(width))


def test_reducer_order_does_not_depend_on_which_node_finishes_first():
    def run(finishes_first: str) -> list[str]:
        done = {"alpha": threading.Event(), "beta": threading.Event()}

        def node(me: str, other: str):
            def fn(state: State) -> dict:
                if me != finishes_first:
                    wait(done[other])
                done[me].set()
                return {"log": [me]}

            return fn

        g = StateGraph(State)
        g.add_node("beta", node("beta", "alpha"))
        g.add_node("alpha", node("alpha", "beta"))
        g.add_edge(START, "beta")
        g.add_edge(START, "alpha")
        g.add_edge("alpha", END)
        g.add_edge("beta", END)
        return g.compile().invoke({"log": []})["log"]

    assert run("alpha") == run("beta")


def test_send_results_are_applied_in_send_order_whatever_order_they_finish():
    done = [threading.Event() for _ in range(5)]

    def work(arg: dict) -> dict:
        i = arg["i"]
        if i + 1 < len(done):
            wait(done[i + 1])  # finish in reverse order: 4, 3, 2, 1, 0
        done[i].set()
        return {"log": [f"item {i}"]}

    g = StateGraph(State)
    g.add_node("work", work)
    g.add_conditional_edges(START, lambda s: [Send("work", {"i": i}) for i in range(5)])
    g.add_edge("work", END)
    assert g.compile().invoke({"log": []})["log"] == [f"item {i}" for i in range(5)]


def test_two_nodes_replacing_one_key_in_a_step_is_an_error_naming_both(saver):
    g = StateGraph(State)
    g.add_node("first_writer", lambda s: {"value": "one"})
    g.add_node("second_writer", lambda s: {"value": "two"})
    g.add_edge(START, "first_writer")
    g.add_edge(START, "second_writer")
    g.add_edge("first_writer", END)
    g.add_edge("second_writer", END)
    with pytest.raises(InvalidUpdateError) as exc:
        g.compile(checkpointer=saver).invoke({"log": []}, cfg())
    assert "first_writer" in str(exc.value) and "second_writer" in str(exc.value)
    assert "value" in str(exc.value)


def test_two_nodes_appending_to_a_reducer_key_in_a_step_is_fine():
    g = StateGraph(State)
    g.add_node("a", append("a"))
    g.add_node("b", append("b"))
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("a", END)
    g.add_edge("b", END)
    assert sorted(g.compile().invoke({"log": []})["log"]) == ["a", "b"]


def test_writing_a_key_the_schema_lacks_is_an_error_naming_the_key():
    g = StateGraph(State)
    g.add_node("typo", lambda s: {"valeu": "x"})
    g.add_edge(START, "typo")
    g.add_edge("typo", END)
    with pytest.raises(InvalidUpdateError, match="valeu"):
        g.compile().invoke({"log": []})


@pytest.mark.parametrize("output", ["oops", 42, ["a", "b"]], ids=["str", "int", "list"])
def test_a_node_returning_a_non_dict_is_a_clear_error(output):
    g = StateGraph(State)
    g.add_node("bad_node", lambda s: output)
    g.add_edge(START, "bad_node")
    g.add_edge("bad_node", END)
    with pytest.raises(InvalidUpdateError, match="bad_node"):
        g.compile().invoke({"log": []})


def test_a_node_returning_none_changes_nothing():
    g = StateGraph(State)
    g.add_node("quiet", lambda s: None)
    g.add_edge(START, "quiet")
    g.add_edge("quiet", END)
    assert g.compile().invoke({"value": "v", "log": []}) == {"value": "v", "log": []}


# ------------------------------------------------------------------ joins


def test_join_edge_runs_its_target_once_after_sources_of_the_same_step(saver):
    calls: list[str] = []
    g = StateGraph(State)
    for name in ("a", "b", "c"):
        g.add_node(name, append(name, calls))
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge(["a", "b"], "c")
    g.add_edge("c", END)
    out = g.compile(checkpointer=saver).invoke({"log": []}, cfg())
    assert calls.count("c") == 1
    assert sorted(out["log"][:2]) == ["a", "b"] and out["log"][2:] == ["c"]


def test_join_edge_waits_for_a_source_that_finishes_a_step_later(saver):
    calls: list[str] = []
    g = StateGraph(State)
    for name in ("a", "x", "b", "c"):
        g.add_node(name, append(name, calls))
    g.add_edge(START, "a")
    g.add_edge(START, "x")
    g.add_edge("x", "b")  # b finishes in step 2, a in step 1
    g.add_edge(["a", "b"], "c")
    g.add_edge("c", END)
    graph = g.compile(checkpointer=saver)
    assert graph.invoke({"log": []}, cfg())["log"] == ["a", "x", "b", "c"]
    assert calls.count("c") == 1
    calls.clear()
    assert graph.invoke({"log": []}, cfg("second"))["log"] == ["a", "x", "b", "c"]
    assert calls.count("c") == 1
