"""``@task(cache_policy=...)`` and ``@entrypoint(cache=..., cache_policy=...)``."""

from __future__ import annotations

from typing import TypedDict

from threadline import START, CachePolicy, StateGraph, entrypoint, task
from threadline.cache.memory import InMemoryCache
from threadline.checkpoint.memory import InMemorySaver

calls: list[int] = []


@task(cache_policy=CachePolicy())
def square(x: int) -> int:
    calls.append(x)
    return x * x


@task(cache_policy=CachePolicy(key_func=lambda x: str(x % 2)))
async def parity(x: int) -> str:
    calls.append(x)
    return "odd" if x % 2 else "even"


def test_an_equal_call_returns_the_cached_result_across_threads():
    calls.clear()

    @entrypoint(checkpointer=InMemorySaver(), cache=InMemoryCache())
    def workflow(n: int) -> list[int]:
        return [square(n).result(), square(n + 1).result()]

    assert workflow.invoke(2, {"configurable": {"thread_id": "a"}}) == [4, 9]
    assert workflow.invoke(2, {"configurable": {"thread_id": "b"}}) == [4, 9]
    assert calls == [2, 3]


async def test_key_func_and_async_tasks():
    calls.clear()

    @entrypoint(cache=InMemoryCache())
    async def workflow(n: int) -> str:
        return await parity(n)

    assert await workflow.ainvoke(1) == "odd"
    assert await workflow.ainvoke(3) == "odd"  # same key: cached
    assert await workflow.ainvoke(2) == "even"
    assert calls == [1, 2]


def test_without_a_cache_the_policy_changes_nothing():
    calls.clear()

    @entrypoint()
    def workflow(n: int) -> int:
        return square(n).result()

    assert workflow.invoke(5) == workflow.invoke(5) == 25
    assert calls == [5, 5]


def test_a_task_called_from_a_graph_node_uses_the_graph_cache():
    calls.clear()

    class S(TypedDict):
        n: int

    g = StateGraph(S)
    g.add_node("sq", lambda s: {"n": square(s["n"]).result()})
    g.add_edge(START, "sq")
    graph = g.compile(cache=InMemoryCache())
    assert graph.invoke({"n": 7}) == graph.invoke({"n": 7}) == {"n": 49}
    assert calls == [7]


def test_entrypoint_cache_policy_caches_its_own_result():
    runs = []

    @entrypoint(cache=InMemoryCache(), cache_policy=CachePolicy())
    def workflow(n: int) -> int:
        runs.append(n)
        return n + 1

    assert workflow.invoke(1) == workflow.invoke(1) == 2
    assert runs == [1]
