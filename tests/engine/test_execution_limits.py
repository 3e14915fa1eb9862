"""The recursion limit and retry policies."""

from __future__ import annotations

import pytest
from execution_graphs import (
    State,
    append,
    cfg,
    chain,
)

from threadline import (
    END,
    START,
    RetryPolicy,
    StateGraph,
)

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
