"""``Runtime[Context]`` in nodes and edges, ``invoke(..., context=...)`` and ``get_runtime()``."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, TypedDict

import pytest
from pydantic import BaseModel, ValidationError

from threadline import END, START, RetryPolicy, StateGraph, get_runtime
from threadline.checkpoint import InMemorySaver
from threadline.runtime import Runtime
from threadline.runtime import get_runtime as get_runtime_from_runtime
from threadline.store import InMemoryStore


@dataclass
class Context:
    user_id: str
    lang: str = "en"


class State(TypedDict, total=False):
    response: str
    log: Annotated[list[str], operator.add]


class Greeting(TypedDict, total=False):
    response: str


def single(node, context_schema=Context, **compile_args):
    g = StateGraph(State, context_schema=context_schema)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g.compile(**compile_args)


def test_the_langgraph_docs_example_greets_the_user_from_context_and_store():
    store = InMemoryStore()
    store.put(("users",), "user_123", {"name": "Alice"})

    def personalized_greeting(state: Greeting, runtime: Runtime[Context]) -> Greeting:
        user_id = runtime.context.user_id
        name = "unknown_user"
        if runtime.store and (memory := runtime.store.get(("users",), user_id)):
            name = memory.value["name"]
        return {"response": f"Hello {name}! Nice to see you again."}

    graph = (
        StateGraph(state_schema=Greeting, context_schema=Context)
        .add_node("personalized_greeting", personalized_greeting)
        .set_entry_point("personalized_greeting")
        .set_finish_point("personalized_greeting")
        .compile(store=store)
    )
    result = graph.invoke({}, context=Context(user_id="user_123"))
    assert result == {"response": "Hello Alice! Nice to see you again."}


def test_a_dict_context_becomes_the_context_schema_dataclass():
    seen = []
    graph = single(lambda state, runtime: seen.append(runtime.context) or {})
    graph.invoke({}, context={"user_id": "u2"})
    assert seen == [Context(user_id="u2", lang="en")]


def test_a_dict_context_becomes_a_pydantic_context_schema():
    class Settings(BaseModel):
        model: str
        temperature: float = 0.0

    seen = []
    graph = single(lambda state, runtime: seen.append(runtime.context) or {}, Settings)
    graph.invoke({}, context={"model": "small", "temperature": "0.5"})
    assert seen == [Settings(model="small", temperature=0.5)]
    with pytest.raises(ValidationError):
        graph.invoke({}, context={"temperature": 1.0})


def test_a_dict_context_that_does_not_fit_the_dataclass_fails_before_any_node_runs():
    calls = []
    graph = single(lambda state, runtime: calls.append(1) or {})
    with pytest.raises(TypeError, match="nope"):
        graph.invoke({}, context={"nope": 1})
    assert calls == []


def test_other_contexts_are_passed_as_they_are_and_none_without_one():
    seen = []
    graph = single(lambda state, runtime: seen.append(runtime.context) or {})
    graph.invoke({}, context="just a string")
    graph.invoke({})
    untyped = single(lambda state, runtime: seen.append(runtime.context) or {}, None)
    untyped.invoke({}, context={"k": 1})
    assert seen == ["just a string", None, {"k": 1}]


def test_a_parameter_annotated_runtime_gets_it_under_any_name():
    def node(state: State, rt: Runtime[Context]) -> dict:
        return {"response": rt.context.lang}

    assert single(node).invoke({}, context=Context("u", lang="fr"))["response"] == "fr"


def test_runtime_stream_writer_sends_to_the_custom_stream():
    def node(state: State, runtime: Runtime[Context]) -> dict:
        runtime.stream_writer({"progress": runtime.context.user_id})
        return {"response": "done"}

    chunks = list(single(node).stream({}, stream_mode=["custom", "updates"], context=Context("u7")))
    assert chunks == [("custom", {"progress": "u7"}), ("updates", {"node": {"response": "done"}})]


def test_get_runtime_returns_the_nodes_runtime_from_threadline_and_threadline_runtime():
    seen = []

    def node(state: State, runtime: Runtime[Context]) -> dict:
        seen.append((get_runtime() is runtime, get_runtime_from_runtime(Context).context))
        return {}

    single(node).invoke({}, context=Context("u1"))
    assert seen == [(True, Context("u1"))]


def test_get_runtime_outside_a_node_is_a_clear_error():
    with pytest.raises(RuntimeError, match="inside a running node"):
        get_runtime()


def test_runtime_has_langgraphs_fields_and_previous_is_none_in_a_graph():
    seen = {}

    def node(state: State, runtime: Runtime[Context], previous) -> dict:
        info = runtime.execution_info
        seen.update(
            previous=(previous, runtime.previous),
            server_info=runtime.server_info,
            thread_id=info.thread_id,
            run_id=info.run_id,
            attempt=info.node_attempt,
            checkpoint_id=info.checkpoint_id,
            ns_is_task=info.checkpoint_ns == f"node:{info.task_id}",
        )
        return {}

    graph = single(node, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}, "run_id": "r-1"}
    graph.invoke({}, config, context=Context("u"))
    # the checkpoint the node's step started from: the one whose next step is the node
    started_from = list(graph.get_state_history(config))[1]
    assert started_from.next == ("node",)
    assert seen == {
        "previous": (None, None),
        "server_info": None,
        "thread_id": "t1",
        "run_id": "r-1",
        "attempt": 1,
        "checkpoint_id": started_from.config["configurable"]["checkpoint_id"],
        "ns_is_task": True,
    }


def test_execution_info_counts_attempts_of_a_retried_node():
    attempts = []

    def flaky(state: State, runtime: Runtime[Context]) -> dict:
        info = runtime.execution_info
        attempts.append((info.node_attempt, info.node_first_attempt_time))
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return {"response": "ok"}

    g = StateGraph(State)
    g.add_node("flaky", flaky, retry_policy=RetryPolicy(initial_interval=0.0, jitter=False))
    g.add_edge(START, "flaky")
    g.add_edge("flaky", END)
    assert g.compile().invoke({})["response"] == "ok"
    assert [a for a, _ in attempts] == [1, 2, 3]
    assert len({t for _, t in attempts}) == 1  # the first attempt's start, on every attempt


def test_conditional_edges_take_the_runtime_too():
    def route(state: State, runtime: Runtime[Context]) -> str:
        return "admin" if runtime.context.user_id == "root" else "guest"

    g = StateGraph(State, context_schema=Context)
    g.add_node("start", lambda state: {"log": ["start"]})
    g.add_node("admin", lambda state: {"log": ["admin"]})
    g.add_node("guest", lambda state: {"log": ["guest"]})
    g.add_edge(START, "start")
    g.add_conditional_edges("start", route, ["admin", "guest"])
    g.add_edge("admin", END)
    g.add_edge("guest", END)
    graph = g.compile()
    assert graph.invoke({}, context=Context("root"))["log"] == ["start", "admin"]
    assert graph.invoke({}, context=Context("bob"))["log"] == ["start", "guest"]


@pytest.mark.parametrize(
    "route",
    [
        lambda state, runtime: runtime.context.lang,
        lambda state: get_runtime().context.lang,
    ],
    ids=["runtime parameter", "get_runtime"],
)
def test_a_conditional_entry_point_sees_the_context(route):
    g = StateGraph(State, context_schema=Context)
    g.add_node("en", lambda state: {"response": "hello"})
    g.add_node("fr", lambda state: {"response": "bonjour"})
    g.set_conditional_entry_point(route, ["en", "fr"])
    g.add_edge("en", END)
    g.add_edge("fr", END)
    assert g.compile().invoke({}, context=Context("u", lang="fr"))["response"] == "bonjour"


def test_subgraphs_see_the_parents_context_unless_given_their_own():
    def inner(state: State, runtime: Runtime[Context]) -> dict:
        return {"log": [f"inner:{runtime.context.user_id}"]}

    sub = StateGraph(State)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    sub.add_edge("inner", END)
    child = sub.compile()

    def calls_child(state: State) -> dict:
        return {"log": child.invoke({})["log"]}

    def overrides(state: State) -> dict:
        return {"log": child.invoke({}, context=Context("override"))["log"]}

    g = StateGraph(State, context_schema=Context)
    g.add_node("calls_child", calls_child)
    g.add_node("overrides", overrides)
    g.add_node("as_node", child)
    g.add_edge(START, "calls_child")
    g.add_edge("calls_child", "overrides")
    g.add_edge("overrides", "as_node")
    g.add_edge("as_node", END)
    result = g.compile(checkpointer=InMemorySaver()).invoke(
        {}, {"configurable": {"thread_id": "t"}}, context=Context("parent")
    )
    assert result["log"] == ["inner:parent", "inner:override", "inner:parent"]


async def test_async_nodes_and_ainvoke_astream_take_context():
    async def node(state: State, runtime: Runtime[Context]) -> dict:
        return {"log": [runtime.context.user_id, get_runtime().context.lang]}

    def sync_node(state: State, runtime: Runtime[Context]) -> dict:
        return {"log": [f"sync:{runtime.context.user_id}"]}

    g = StateGraph(State, context_schema=Context)
    g.add_node("node", node)
    g.add_node("sync_node", sync_node)
    g.add_edge(START, "node")
    g.add_edge("node", "sync_node")
    g.add_edge("sync_node", END)
    graph = g.compile()
    result = await graph.ainvoke({}, context={"user_id": "a1", "lang": "de"})
    assert result["log"] == ["a1", "de", "sync:a1"]
    chunks = [c async for c in graph.astream({}, context=Context("a2"))]
    assert chunks == [{"node": {"log": ["a2", "en"]}}, {"sync_node": {"log": ["sync:a2"]}}]


def test_nodes_that_take_only_state_are_still_called_plainly():
    calls = []

    def node(state: State) -> dict:
        calls.append(dict(state))
        return {"response": "x"}

    assert single(node).invoke({"log": []}, context=Context("u")) == {"response": "x", "log": []}
    assert calls == [{"log": []}]
    assert StateGraph(State).add_node("n", node).nodes["n"].style.plain


async def test_an_async_node_awaiting_a_subgraph_passes_its_context_down():
    async def inner(state: State, runtime: Runtime[Context]) -> dict:
        return {"log": [f"inner:{runtime.context.user_id}"]}

    sub = StateGraph(State)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    sub.add_edge("inner", END)
    child = sub.compile()

    async def outer(state: State) -> dict:
        return {"log": (await child.ainvoke({}))["log"]}

    g = StateGraph(State, context_schema=Context)
    g.add_node("outer", outer)
    g.add_edge(START, "outer")
    g.add_edge("outer", END)
    assert (await g.compile().ainvoke({}, context=Context("a")))["log"] == ["inner:a"]
