"""Node cache: ``add_node(..., cache_policy=CachePolicy(...))`` with ``compile(cache=...)``."""

from __future__ import annotations

import operator
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from pydantic import BaseModel

from threadline import END, START, CachePolicy, Send, StateGraph, interrupt, serde
from threadline.cache.memory import InMemoryCache
from threadline.cache.sqlite import SqliteCache
from threadline.checkpoint import InMemorySaver
from threadline.checkpoint.seals import unseal
from threadline.errors import ConfigError, GraphValidationError, SerializationError
from threadline.types import Command


class State(TypedDict, total=False):
    x: int
    result: int


def expensive(calls: list[Any]):
    def expensive_node(state: State) -> dict[str, int]:
        calls.append(state["x"])
        return {"result": state["x"] * 2}

    return expensive_node


DEFAULT_POLICY = CachePolicy()


def graph_of(node, policy: CachePolicy | None = DEFAULT_POLICY, **compile_args):
    g = StateGraph(State)
    g.add_node("expensive_node", node, cache_policy=policy)
    g.add_edge(START, "expensive_node")
    g.add_edge("expensive_node", END)
    return g.compile(**compile_args)


def test_the_docs_example_reuses_the_result_and_marks_the_update_as_cached():
    calls: list[int] = []
    graph = graph_of(expensive(calls), CachePolicy(ttl=3), cache=InMemoryCache())
    first = graph.invoke({"x": 5}, stream_mode="updates")
    second = graph.invoke({"x": 5}, stream_mode="updates")
    assert first == [{"expensive_node": {"result": 10}}]
    assert second == [{"expensive_node": {"result": 10}, "__metadata__": {"cached": True}}]
    assert graph.invoke({"x": 5}) == {"x": 5, "result": 10}
    assert graph.invoke({"x": 5}, stream_mode=["updates"]) == [("updates", second[0])]
    assert calls == [5]


def test_a_cached_task_has_no_debug_result_event():
    graph = graph_of(expensive([]), cache=InMemoryCache())
    kinds = []
    for _ in range(2):
        events = graph.stream({"x": 5}, stream_mode="debug")
        kinds.append([e["type"] for e in events if e["type"] != "checkpoint"])
    assert kinds == [["task", "task_result"], ["task"]]  # as LangGraph streams them


def test_a_different_input_misses_and_dict_key_order_does_not_matter():
    class Pair(TypedDict, total=False):
        opts: dict[str, int]
        out: str

    calls = []

    def node(state: Pair) -> dict:
        calls.append(state["opts"])
        return {"out": str(sorted(state["opts"].items()))}

    g = StateGraph(Pair)
    g.add_node("node", node, cache_policy=CachePolicy())
    g.add_edge(START, "node")
    g.add_edge("node", END)
    graph = g.compile(cache=InMemoryCache())
    graph.invoke({"opts": {"a": 1, "b": 2}})
    graph.invoke({"opts": {"b": 2, "a": 1}})
    graph.invoke({"opts": {"a": 1, "b": 3}})
    assert calls == [{"a": 1, "b": 2}, {"a": 1, "b": 3}]


class PydanticState(BaseModel):
    x: int
    tags: set[str] = set()
    result: int = 0


@dataclass
class DataclassState:
    x: int
    tags: set[str] = field(default_factory=set)
    result: int = 0


@pytest.mark.parametrize("schema", [PydanticState, DataclassState])
def test_pydantic_and_dataclass_states_are_cached_by_value(schema):
    calls = []

    def node(state) -> dict:
        calls.append(state.x)
        return {"result": state.x * 10}

    g = StateGraph(schema)
    g.add_node("node", node, cache_policy=CachePolicy())
    g.add_edge(START, "node")
    g.add_edge("node", END)
    graph = g.compile(cache=InMemoryCache())
    assert graph.invoke(schema(x=1, tags={"a", "b"}))["result"] == 10
    assert graph.invoke(schema(x=1, tags={"b", "a"}))["result"] == 10
    assert graph.invoke(schema(x=2))["result"] == 20
    assert calls == [1, 2]


def test_entries_expire_after_ttl_seconds():
    calls: list[int] = []
    graph = graph_of(expensive(calls), CachePolicy(ttl=0.2), cache=InMemoryCache())
    graph.invoke({"x": 1})
    graph.invoke({"x": 1})
    time.sleep(0.25)
    graph.invoke({"x": 1})
    assert calls == [1, 1]


def test_clearing_the_cache_or_the_graphs_cache_runs_the_node_again():
    calls: list[int] = []
    cache = InMemoryCache()
    graph = graph_of(expensive(calls), cache=cache)
    graph.invoke({"x": 1})
    cache.clear()
    graph.invoke({"x": 1})
    graph.clear_cache(["expensive_node"])
    graph.invoke({"x": 1})
    graph.invoke({"x": 1})
    assert calls == [1, 1, 1]
    with pytest.raises(ConfigError, match="not a node"):
        graph.clear_cache(["nope"])


def test_a_custom_key_func_decides_what_counts_as_the_same_input():
    calls: list[int] = []
    policy = CachePolicy(key_func=lambda state: str(state["x"] % 2))
    graph = graph_of(expensive(calls), policy, cache=InMemoryCache())
    assert graph.invoke({"x": 1})["result"] == 2
    assert graph.invoke({"x": 3})["result"] == 2  # same key: the stored result
    assert calls == [1]


def test_without_a_cache_or_without_a_policy_nothing_is_cached():
    calls: list[int] = []
    no_cache = graph_of(expensive(calls))
    no_policy = graph_of(expensive(calls), None, cache=InMemoryCache())
    for graph in (no_cache, no_cache, no_policy, no_policy):
        graph.invoke({"x": 4})
    assert calls == [4, 4, 4, 4]
    with pytest.raises(ConfigError, match="no cache"):
        no_cache.clear_cache()


def test_errors_and_interrupts_are_not_cached():
    attempts: list[int] = []

    def flaky(state: State) -> dict:
        attempts.append(state["x"])
        if len(attempts) == 1:
            raise ValueError("first call fails")
        return {"result": 1}

    graph = graph_of(flaky, cache=InMemoryCache())
    with pytest.raises(ValueError):
        graph.invoke({"x": 1})
    graph.invoke({"x": 1})
    graph.invoke({"x": 1})
    assert attempts == [1, 1]

    asked: list[int] = []

    def ask(state: State) -> dict:
        asked.append(state["x"])
        return {"result": interrupt("how much?")}

    human = graph_of(ask, cache=InMemoryCache(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert "__interrupt__" in human.invoke({"x": 2}, config)
    assert human.invoke(Command(resume=7), config)["result"] == 7
    # the answered run's result is cached: a new run with the same input does not ask again
    assert human.invoke({"x": 2}, {"configurable": {"thread_id": "u"}})["result"] == 7
    assert asked == [2, 2]


def test_a_cached_node_routes_as_it_did_and_its_step_is_checkpointed():
    class Routed(TypedDict, total=False):
        x: int
        log: Annotated[list[str], operator.add]

    calls = []

    def classify(state: Routed) -> dict:
        calls.append(state["x"])
        return {"log": ["classify"]}

    g = StateGraph(Routed)
    g.add_node("classify", classify, cache_policy=CachePolicy())
    g.add_node("big", lambda s: {"log": ["big"]})
    g.add_node("small", lambda s: {"log": ["small"]})
    g.add_edge(START, "classify")
    g.add_conditional_edges("classify", lambda s: "big" if s["x"] > 5 else "small")
    g.add_edge("big", END)
    g.add_edge("small", END)
    graph = g.compile(cache=InMemoryCache(), checkpointer=InMemorySaver())
    runs = [
        graph.invoke({"x": x}, {"configurable": {"thread_id": f"t{x}{i}"}})
        for i in (1, 2)
        for x in (9, 1)
    ]
    assert [r["log"] for r in runs] == [["classify", "big"], ["classify", "small"]] * 2
    assert calls == [9, 1]
    history = list(graph.get_state_history({"configurable": {"thread_id": "t92"}}))
    assert [h.next for h in history] == [(), ("big",), ("classify",), ("__start__",)]


def test_a_hit_is_routed_by_the_graph_as_it_is_now(tmp_path: Path):
    """The stored entry holds what the node returned, not where the graph sent it then."""

    class Routed(TypedDict, total=False):
        x: int
        log: Annotated[list[str], operator.add]

    calls = []

    def step(state: Routed) -> Command:
        calls.append(state["x"])
        return Command(update={"log": ["step"]}, goto="audit")

    def build(after_step: str) -> StateGraph:
        g = StateGraph(Routed)
        g.add_node("step", step, cache_policy=CachePolicy(), destinations=["audit"])
        g.add_node("audit", lambda s: {"log": ["audit"]})
        g.add_edge(START, "step")
        g.add_edge("step", after_step)
        g.add_edge("audit", END)
        if after_step == "report":
            g.add_node("report", lambda s: {"log": ["report"]})
            g.add_edge("report", END)
        return g

    path = str(tmp_path / "cache.db")
    with SqliteCache(path=path) as cache:
        first = build(END).compile(cache=cache).invoke({"x": 1})
    with SqliteCache(path=path) as cache:  # the graph was edited: step now also goes to report
        second = build("report").compile(cache=cache).invoke({"x": 1})
    assert first["log"] == ["step", "audit"]
    assert second["log"] == ["step", "audit", "report"]
    assert calls == [1]


def test_send_tasks_are_cached_by_their_argument():
    class Fan(TypedDict, total=False):
        items: list[int]
        squares: Annotated[list[int], operator.add]

    calls = []

    def square(arg: dict) -> dict:
        calls.append(arg["n"])
        return {"squares": [arg["n"] ** 2]}

    g = StateGraph(Fan)
    g.add_node("square", square, cache_policy=CachePolicy())
    g.add_conditional_edges(START, lambda s: [Send("square", {"n": n}) for n in s["items"]])
    g.add_edge("square", END)
    graph = g.compile(cache=InMemoryCache())
    assert graph.invoke({"items": [2, 3]})["squares"] == [4, 9]
    assert graph.invoke({"items": [3, 4]})["squares"] == [9, 16]
    assert calls == [2, 3, 4]


def test_a_cached_value_is_a_copy_the_node_input_cannot_change():
    class Listy(TypedDict, total=False):
        x: int
        items: list[str]

    g = StateGraph(Listy)
    g.add_node("make", lambda s: {"items": ["a"]}, cache_policy=CachePolicy())
    g.add_edge(START, "make")
    g.add_edge("make", END)
    graph = g.compile(cache=InMemoryCache())
    graph.invoke({"x": 1})["items"].append("mutated")
    assert graph.invoke({"x": 1})["items"] == ["a"]


async def test_async_runs_use_the_cache():
    calls = []

    async def node(state: State) -> dict:
        calls.append(state["x"])
        return {"result": state["x"] + 1}

    graph = graph_of(node, cache=InMemoryCache())
    assert (await graph.ainvoke({"x": 1}))["result"] == 2
    chunks = await graph.ainvoke({"x": 1}, stream_mode="updates")
    assert chunks == [{"expensive_node": {"result": 2}, "__metadata__": {"cached": True}}]
    await graph.aclear_cache()
    await graph.ainvoke({"x": 1})
    assert calls == [1, 1]


def test_sqlite_cache_keeps_results_across_instances_in_serde_encoding(tmp_path: Path):
    path = tmp_path / "cache.db"
    calls: list[int] = []
    with SqliteCache(path=str(path)) as cache:
        graph_of(expensive(calls), cache=cache).invoke({"x": 6})
    with SqliteCache(path=str(path)) as cache:
        assert graph_of(expensive(calls), cache=cache).invoke({"x": 6})["result"] == 12
    assert calls == [6]
    with sqlite3.connect(path) as conn:
        ns, key, blob = conn.execute("SELECT ns, key, value FROM threadline_cache").fetchone()
    # threadline's serde, not pickle, sealed to its namespace and key
    updates, gotos = serde.loads(unseal(blob, "the entry", ns, key))
    assert (dict(updates), gotos) == ({"result": 12}, ())
    with SqliteCache(path=path) as cache:
        cache.clear()
        graph_of(expensive(calls), cache=cache).invoke({"x": 6})
    assert calls == [6, 6]


_OTHER_PROCESS = """
import sys
from typing import TypedDict
from threadline import END, START, CachePolicy, StateGraph
from threadline.cache.sqlite import SqliteCache

class State(TypedDict, total=False):
    tags: set[str]
    out: str

def node(state):
    print("ran")
    return {"out": ",".join(sorted(state["tags"]))}

g = StateGraph(State)
g.add_node("node", node, cache_policy=CachePolicy())
g.add_edge(START, "node")
g.add_edge("node", END)
with SqliteCache(path=sys.argv[1]) as cache:
    print(g.compile(cache=cache).invoke({"tags": {"alpha", "beta", "gamma", "delta"}})["out"])
"""


def test_the_default_key_is_the_same_in_another_process(tmp_path: Path):
    """Sets iterate in a different order under another hash seed; the key must not change."""
    script = tmp_path / "run.py"
    script.write_text(_OTHER_PROCESS)
    outputs = []
    for seed in ("1", "2"):
        env = {"PYTHONHASHSEED": seed, "PYTHONPATH": str(Path(__file__).parents[2])}
        done = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "c.db")],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.append(done.stdout.split())
    assert outputs == [["ran", "alpha,beta,delta,gamma"], ["alpha,beta,delta,gamma"]]


def test_an_input_the_default_key_cannot_encode_fails_the_task_clearly():
    class Opaque:
        pass

    class Holder(TypedDict, total=False):
        thing: Any
        out: int

    g = StateGraph(Holder)
    g.add_node("node", lambda s: {"out": 1}, cache_policy=CachePolicy())
    g.add_edge(START, "node")
    g.add_edge("node", END)
    with pytest.raises(
        SerializationError, match=r"cache key for the input of node 'node'.*key_func"
    ):
        g.compile(cache=InMemoryCache()).invoke({"thing": Opaque()})


def test_bad_cache_arguments_are_refused_early():
    with pytest.raises(GraphValidationError, match="cache_policy of 'n' must be a CachePolicy"):
        StateGraph(State).add_node("n", lambda s: {}, cache_policy={"ttl": 3})
    with pytest.raises(GraphValidationError, match="cache must be a threadline cache"):
        graph_of(lambda s: {}, cache={})
    with pytest.raises(ValueError, match="ttl"):
        CachePolicy(ttl=-1)
    with pytest.raises(TypeError, match="key_func"):
        CachePolicy(key_func="x")
    with pytest.raises(TypeError):
        CachePolicy(lambda s: "k")  # keyword-only, as in LangGraph
