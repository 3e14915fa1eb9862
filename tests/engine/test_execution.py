"""Running graphs: supersteps, reducers, routing, Send, Command, subgraphs, limits, retries."""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass, field
from typing import Annotated, Literal, TypedDict

import pytest
from pydantic import BaseModel

from threadline import (
    END,
    START,
    Command,
    RetryPolicy,
    Send,
    StateGraph,
    get_store,
)
from threadline.checkpoint import InMemorySaver
from threadline.errors import InvalidUpdateError, ThreadlineError
from threadline.store import InMemoryStore


class State(TypedDict, total=False):
    value: str
    seen: str
    log: Annotated[list[str], operator.add]


def cfg(thread: str = "t", **extra) -> dict:
    return {"configurable": {"thread_id": thread}, **extra}


def append(name: str, calls: list[str] | None = None):
    def node(state: State) -> dict:
        if calls is not None:
            calls.append(name)
        return {"log": [name]}

    return node


def chain(*names: str) -> StateGraph:
    g = StateGraph(State)
    previous = START
    for name in names:
        g.add_node(name, append(name))
        g.add_edge(previous, name)
        previous = name
    g.add_edge(previous, END)
    return g


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


# ------------------------------------------------------------------ Send


class MapState(TypedDict, total=False):
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]
    summary: str


def test_send_fans_out_and_an_append_reducer_gathers_the_results(saver):
    received: list[dict] = []
    summaries: list[list[str]] = []

    def write_joke(arg: dict) -> dict:
        received.append(arg)
        return {"jokes": [f"joke about {arg['subject']}"]}

    def summarize(state: MapState) -> dict:
        summaries.append(list(state["jokes"]))
        return {"summary": f"{len(state['jokes'])} jokes"}

    subjects = ["cats", "dogs", "owls", "bees", "eels"]
    g = StateGraph(MapState)
    g.add_node("write_joke", write_joke)
    g.add_node("summarize", summarize)
    g.add_conditional_edges(
        START, lambda s: [Send("write_joke", {"subject": x}) for x in s["subjects"]], ["write_joke"]
    )
    g.add_edge("write_joke", "summarize")
    g.add_edge("summarize", END)
    out = g.compile(checkpointer=saver).invoke({"subjects": subjects}, cfg())
    assert sorted(received, key=lambda a: a["subject"]) == sorted(
        ({"subject": x} for x in subjects), key=lambda a: a["subject"]
    )
    assert out["jokes"] == [f"joke about {x}" for x in subjects]
    assert summaries == [out["jokes"]]
    assert out["summary"] == "5 jokes"


# ------------------------------------------------------------------ conditional edges


def branching_graph(path, path_map=None) -> tuple[StateGraph, list[str]]:
    calls: list[str] = []
    g = StateGraph(State)
    g.add_node("decide", append("decide", calls))
    for name in ("left", "right"):
        g.add_node(name, append(name, calls))
        g.add_edge(name, END)
    g.add_edge(START, "decide")
    g.add_conditional_edges("decide", path, path_map)
    return g, calls


def test_conditional_edge_returning_a_node_name():
    g, _ = branching_graph(lambda s: "right" if s["value"] == "r" else "left")
    graph = g.compile()
    assert graph.invoke({"value": "r", "log": []})["log"] == ["decide", "right"]
    assert graph.invoke({"value": "l", "log": []})["log"] == ["decide", "left"]


def test_conditional_edge_sees_the_write_of_its_own_node():
    g = StateGraph(State)
    g.add_node("decide", lambda s: {"value": "r"})
    g.add_node("left", append("left"))
    g.add_node("right", append("right"))
    g.add_edge(START, "decide")
    g.add_conditional_edges("decide", lambda s: s["value"] == "r", {True: "right", False: "left"})
    g.add_edge("left", END)
    g.add_edge("right", END)
    assert g.compile().invoke({"value": "l", "log": []})["log"] == ["right"]


def test_conditional_edge_returning_a_list_runs_both_in_the_next_step():
    g, _ = branching_graph(lambda s: ["left", "right"])
    out = g.compile().invoke({"log": []})
    assert out["log"][0] == "decide" and sorted(out["log"][1:]) == ["left", "right"]


def test_conditional_edge_returning_end_stops_the_run():
    g, calls = branching_graph(lambda s: END)
    assert g.compile().invoke({"log": []}) == {"log": ["decide"]}
    assert calls == ["decide"]


def test_conditional_edge_with_a_path_map_dict():
    g, _ = branching_graph(
        lambda s: "go right" if s["value"] == "r" else "stop",
        {"go left": "left", "go right": "right", "stop": END},
    )
    graph = g.compile()
    assert graph.invoke({"value": "r", "log": []})["log"] == ["decide", "right"]
    assert graph.invoke({"value": "x", "log": []})["log"] == ["decide"]


def test_conditional_edge_with_a_path_map_list():
    g, _ = branching_graph(lambda s: "left", ["left", "right"])
    assert g.compile().invoke({"log": []})["log"] == ["decide", "left"]


async def async_decide(state: State) -> dict:
    return {"log": ["decide"]}


@pytest.mark.parametrize(
    "decide", [append("decide"), async_decide], ids=["sync-node", "async-node"]
)
async def test_an_async_path_function_routes_under_ainvoke(decide):
    async def choose(state: State) -> str:
        return "right"

    g = StateGraph(State)
    g.add_node("decide", decide)
    g.add_node("left", append("left"))
    g.add_node("right", append("right"))
    g.add_edge(START, "decide")
    g.add_conditional_edges("decide", choose, ["left", "right"])
    g.add_edge("left", END)
    g.add_edge("right", END)
    assert await g.compile().ainvoke({"log": []}) == {"log": ["decide", "right"]}


def test_conditional_edge_returning_an_unknown_node_is_an_error_naming_it():
    g, calls = branching_graph(lambda s: "nowhere")
    with pytest.raises(InvalidUpdateError, match="nowhere"):
        g.compile().invoke({"log": []})
    assert "left" not in calls and "right" not in calls


# ------------------------------------------------------------------ Command


def review(state: State) -> Command[Literal["approve", "reject"]]:
    target = "approve" if state["value"] == "ok" else "reject"
    return Command(update={"log": ["review"]}, goto=target)


def test_a_node_returning_command_updates_and_routes(saver):
    g = StateGraph(State)
    g.add_node("review", review)
    g.add_node("approve", append("approve"))
    g.add_node("reject", append("reject"))
    g.add_edge(START, "review")
    g.add_edge("approve", END)
    g.add_edge("reject", END)
    graph = g.compile(checkpointer=saver)
    assert graph.invoke({"value": "ok", "log": []}, cfg("1"))["log"] == ["review", "approve"]
    assert graph.invoke({"value": "no", "log": []}, cfg("2"))["log"] == ["review", "reject"]


def test_command_goto_with_destinations_declared_on_add_node(saver):
    def route(state: State) -> Command:
        return Command(update={"value": "routed"}, goto=["left", Send("right", {"log": []})])

    g = StateGraph(State)
    g.add_node("route", route, destinations=["left", "right"])
    g.add_node("left", append("left"))
    g.add_node("right", lambda arg: {"log": [f"right got {arg}"]})
    g.add_edge(START, "route")
    g.add_edge("left", END)
    g.add_edge("right", END)
    out = g.compile(checkpointer=saver).invoke({"log": []}, cfg())
    assert out == {"value": "routed", "log": ["left", "right got {'log': []}"]}


class TeamState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    owner: str


def handoff_graph(saver, ran: list[str]):
    """A parent whose ``writer`` subgraph hands off to the parent's ``reviewer`` node."""

    def hand_off(state: TeamState) -> Command:
        return Command(graph=Command.PARENT, goto="reviewer", update={"owner": "reviewer"})

    child = StateGraph(TeamState)
    child.add_node("hand_off", hand_off, destinations=[END])
    child.add_edge(START, "hand_off")

    def reviewer(state: TeamState) -> dict:
        ran.append(state["owner"])
        return {"log": ["reviewed"]}

    parent = StateGraph(TeamState)
    parent.add_node("writer", child.compile(), destinations=["reviewer"])
    parent.add_node("reviewer", reviewer)
    parent.add_edge(START, "writer")
    parent.add_edge("reviewer", END)
    return parent.compile(checkpointer=saver)


def test_command_to_parent_from_a_subgraph_routes_in_the_parent(saver):
    ran: list[str] = []
    out = handoff_graph(saver, ran).invoke({"log": ["start"]}, cfg())
    assert ran == ["reviewer"]
    assert out == {"log": ["start", "reviewed"], "owner": "reviewer"}


async def test_command_to_parent_from_a_subgraph_routes_in_the_parent_async(saver):
    ran: list[str] = []
    out = await handoff_graph(saver, ran).ainvoke({"log": ["start"]}, cfg())
    assert ran == ["reviewer"]
    assert out == {"log": ["start", "reviewed"], "owner": "reviewer"}


# ------------------------------------------------------------------ subgraphs


class ChildState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    value: str


def test_a_subgraph_sharing_an_append_key_does_not_duplicate_the_parents_items(saver):
    child = StateGraph(ChildState)
    child.add_node("inner_one", append("inner_one"))
    child.add_node("inner_two", lambda s: {"log": ["inner_two"], "value": "set by child"})
    child.add_edge(START, "inner_one")
    child.add_edge("inner_one", "inner_two")
    child.add_edge("inner_two", END)

    parent = StateGraph(State)
    parent.add_node("before", append("before"))
    parent.add_node("child", child.compile())
    parent.add_node("after", append("after"))
    parent.add_edge(START, "before")
    parent.add_edge("before", "child")
    parent.add_edge("child", "after")
    parent.add_edge("after", END)
    out = parent.compile(checkpointer=saver).invoke({"log": ["input"]}, cfg())
    assert out == {
        "log": ["input", "before", "inner_one", "inner_two", "after"],
        "value": "set by child",
    }


def test_get_store_inside_a_subgraph_node_is_the_parents_store():
    store = InMemoryStore()

    def remember(state: State) -> dict:
        get_store().put(("memories",), "m1", {"text": "from subgraph"})
        return {"log": ["remembered"]}

    child = StateGraph(State)
    child.add_node("remember", remember)
    child.add_edge(START, "remember")
    child.add_edge("remember", END)
    parent = StateGraph(State)
    parent.add_node("child", child.compile())
    parent.add_edge(START, "child")
    parent.add_edge("child", END)
    parent.compile(store=store).invoke({"log": []})
    item = store.get(("memories",), "m1")
    assert item is not None and item.value == {"text": "from subgraph"}


# ------------------------------------------------------------------ recursion limit


def loop_graph() -> StateGraph:
    g = StateGraph(State)
    g.add_node("tick", append("tick"))
    g.add_edge(START, "tick")
    g.add_conditional_edges("tick", lambda s: "tick" if len(s["log"]) < 100 else END, ["tick", END])
    return g


def test_a_loop_hitting_the_recursion_limit_raises_a_recursion_error():
    with pytest.raises(Exception) as exc:
        loop_graph().compile().invoke({"log": []}, {"recursion_limit": 5})
    assert "Recursion" in type(exc.value).__name__


def test_a_chain_of_n_nodes_runs_with_recursion_limit_n():
    names = [f"n{i}" for i in range(5)]
    graph = chain(*names).compile()
    assert graph.invoke({"log": []}, {"recursion_limit": 5})["log"] == names
    with pytest.raises(Exception) as exc:
        graph.invoke({"log": []}, {"recursion_limit": 4})
    assert "Recursion" in type(exc.value).__name__


def test_steps_before_the_recursion_limit_stay_saved(saver):
    graph = loop_graph().compile(checkpointer=saver)
    with pytest.raises(Exception) as exc:
        graph.invoke({"log": []}, cfg(recursion_limit=5))
    assert "Recursion" in type(exc.value).__name__
    snap = graph.get_state(cfg())
    assert snap.values["log"] == ["tick"] * 5
    assert snap.next == ("tick",)
    # continuing picks up after the saved steps instead of starting over
    assert graph.invoke(None, cfg(recursion_limit=200))["log"] == ["tick"] * 100


# ------------------------------------------------------------------ retries


class Flaky:
    """Raises ``exc`` for the first ``failures`` calls, then succeeds."""

    def __init__(self, exc: Exception, failures: int) -> None:
        self.exc = exc
        self.failures = failures
        self.calls = 0

    def __call__(self, state: State) -> dict:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc
        return {"log": [f"ok after {self.calls}"]}


def flaky_graph(node: Flaky, policy: RetryPolicy | None) -> StateGraph:
    g = StateGraph(State)
    g.add_node("flaky", node, retry_policy=policy)
    g.add_edge(START, "flaky")
    g.add_edge("flaky", END)
    return g


def test_retry_policy_retries_connection_errors_until_success():
    node = Flaky(ConnectionError("reset"), failures=2)
    graph = flaky_graph(node, RetryPolicy(initial_interval=0, jitter=False)).compile()
    assert graph.invoke({"log": []}) == {"log": ["ok after 3"]}
    assert node.calls == 3


async def test_retry_policy_retries_async_nodes():
    calls: list[int] = []

    async def flaky(state: State) -> dict:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("reset")
        return {"log": ["ok"]}

    g = StateGraph(State)
    g.add_node("flaky", flaky, retry_policy=RetryPolicy(initial_interval=0, jitter=False))
    g.add_edge(START, "flaky")
    g.add_edge("flaky", END)
    assert await g.compile().ainvoke({"log": []}) == {"log": ["ok"]}
    assert len(calls) == 3


def test_retry_policy_does_not_retry_value_error_by_default():
    node = Flaky(ValueError("bad input"), failures=1)
    graph = flaky_graph(node, RetryPolicy(initial_interval=0, jitter=False)).compile()
    with pytest.raises(ValueError, match="bad input"):
        graph.invoke({"log": []})
    assert node.calls == 1


def test_retry_on_value_error_retries_it():
    node = Flaky(ValueError("bad input"), failures=2)
    policy = RetryPolicy(initial_interval=0, jitter=False, retry_on=ValueError)
    assert flaky_graph(node, policy).compile().invoke({"log": []}) == {"log": ["ok after 3"]}
    assert node.calls == 3


def test_retry_policy_gives_up_after_max_attempts():
    node = Flaky(ConnectionError("down"), failures=100)
    policy = RetryPolicy(initial_interval=0, jitter=False, max_attempts=4)
    with pytest.raises(ConnectionError, match="down"):
        flaky_graph(node, policy).compile().invoke({"log": []})
    assert node.calls == 4


def test_without_a_retry_policy_a_node_runs_once():
    node = Flaky(ConnectionError("down"), failures=1)
    with pytest.raises(ConnectionError):
        flaky_graph(node, None).compile().invoke({"log": []})
    assert node.calls == 1


# ------------------------------------------------------------------ state schemas


@dataclass
class DataState:
    topic: str
    notes: Annotated[list[str], operator.add] = field(default_factory=list)
    mood: str = "calm"


def test_a_dataclass_state_reaches_nodes_as_an_instance():
    received: list[object] = []

    def research(state: DataState) -> dict:
        received.append(state)
        return {"notes": [state.topic.upper()], "mood": "busy"}

    g = StateGraph(DataState)
    g.add_node("research", research)
    g.add_node("again", lambda s: {"notes": [f"{len(s.notes)} notes"]})
    g.add_edge(START, "research")
    g.add_edge("research", "again")
    g.add_edge("again", END)
    out = g.compile().invoke({"topic": "owls"})
    assert isinstance(received[0], DataState) and received[0].topic == "owls"
    assert out == {"topic": "owls", "notes": ["OWLS", "1 notes"], "mood": "busy"}


class ModelState(BaseModel):
    topic: str
    notes: Annotated[list[str], operator.add] = []
    mood: str = "calm"


def test_a_pydantic_state_reaches_nodes_as_a_model_and_invoke_returns_a_dict():
    received: list[object] = []

    def research(state: ModelState) -> dict:
        received.append(state)
        return {"notes": [state.topic.upper()]}

    g = StateGraph(ModelState)
    g.add_node("research", research)
    g.add_edge(START, "research")
    g.add_edge("research", END)
    graph = g.compile()
    out = graph.invoke({"topic": "owls"})
    assert isinstance(received[0], ModelState) and received[0].topic == "owls"
    assert type(out) is dict
    assert out["topic"] == "owls" and out["notes"] == ["OWLS"]
    assert graph.invoke(ModelState(topic="bees"))["notes"] == ["BEES"]


# ------------------------------------------------------------------ config and store


def test_a_node_taking_config_receives_the_run_config():
    seen: list[dict] = []

    def node(state: State, config: dict) -> dict:
        seen.append(config)
        return {"log": ["node"]}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    graph = g.compile(checkpointer=InMemorySaver())
    graph.invoke({"log": []}, {"configurable": {"thread_id": "t-42", "user": "ada"}})
    assert seen[0]["configurable"]["thread_id"] == "t-42"
    assert seen[0]["configurable"]["user"] == "ada"


def test_a_node_with_a_store_parameter_and_get_store_share_the_compiled_store():
    store = InMemoryStore()

    def remember(state: State, *, store) -> dict:
        store.put(("users", "ada"), "profile", {"name": state["value"]})
        return {"log": ["remembered"]}

    def recall(state: State) -> dict:
        item = get_store().get(("users", "ada"), "profile")
        return {"log": [f"recalled {item.value['name']}"]}

    g = StateGraph(State)
    g.add_node("remember", remember)
    g.add_node("recall", recall)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    out = g.compile(store=store).invoke({"value": "Ada", "log": []})
    assert out["log"] == ["remembered", "recalled Ada"]
    assert store.get(("users", "ada"), "profile").value == {"name": "Ada"}


# ------------------------------------------------------------------ sync and async


async def test_async_nodes_run_with_ainvoke(saver):
    async def fetch(state: State) -> dict:
        return {"log": ["fetched"]}

    def parse(state: State) -> dict:  # sync nodes may sit in an async graph
        return {"log": ["parsed"]}

    g = StateGraph(State)
    g.add_node("fetch", fetch)
    g.add_node("parse", parse)
    g.add_edge(START, "fetch")
    g.add_edge("fetch", "parse")
    g.add_edge("parse", END)
    assert await g.compile(checkpointer=saver).ainvoke({"log": []}, cfg()) == {
        "log": ["fetched", "parsed"]
    }


def test_sync_invoke_of_a_graph_with_an_async_node_names_the_node():
    ran: list[str] = []

    async def slow_lookup(state: State) -> dict:
        ran.append("slow_lookup")
        return {"log": ["looked up"]}

    g = StateGraph(State)
    g.add_node("first", append("first", ran))
    g.add_node("slow_lookup", slow_lookup)
    g.add_edge(START, "first")
    g.add_edge("first", "slow_lookup")
    g.add_edge("slow_lookup", END)
    with pytest.raises((ThreadlineError, TypeError), match="slow_lookup"):
        g.compile().invoke({"log": []})
    assert "slow_lookup" not in ran


def test_a_graph_without_a_checkpointer_returns_the_final_state_and_keeps_nothing():
    graph = chain("a", "b").compile()
    assert graph.invoke({"value": "v", "log": []}) == {"value": "v", "log": ["a", "b"]}
    assert graph.invoke({"log": ["again"]}) == {"log": ["again", "a", "b"]}


class CountState(TypedDict, total=False):
    x: int
    results: Annotated[list[int], operator.add]
    count: Annotated[int, operator.add]


def test_a_node_may_run_a_compiled_graph_several_times_each_on_its_own_input(saver):
    child = StateGraph(CountState)
    child.add_node("double", lambda s: {"x": s["x"] * 2})
    child.add_edge(START, "double")
    child.add_edge("double", END)
    doubler = child.compile()

    def map_items(state: CountState) -> dict:
        return {"results": [doubler.invoke({"x": i})["x"] for i in (1, 2, 3)]}

    g = StateGraph(CountState)
    g.add_node("map_items", map_items)
    g.add_edge(START, "map_items")
    g.add_edge("map_items", END)
    assert g.compile(checkpointer=saver).invoke({"results": []}, cfg())["results"] == [2, 4, 6]


def test_a_subgraph_sharing_a_counter_key_does_not_add_the_parents_value_twice():
    child = StateGraph(CountState)
    child.add_node("increment", lambda s: {"count": 1})
    child.add_edge(START, "increment")
    child.add_edge("increment", END)
    parent = StateGraph(CountState)
    parent.add_node("child", child.compile())
    parent.add_edge(START, "child")
    parent.add_edge("child", END)
    assert parent.compile().invoke({"count": 5})["count"] == 6
