"""``@entrypoint`` as LangGraph's docs use it: outputs, streams and state as LangGraph shows them.

The expected values were observed by running the same programs on LangGraph 1.2.22.
"""

from __future__ import annotations

import time

import pytest

from threadline import Command, interrupt
from threadline.checkpoint import InMemorySaver
from threadline.errors import GraphValidationError
from threadline.func import entrypoint, task
from threadline.store.memory import InMemoryStore


def _config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


@task
def compose_essay(topic: str) -> str:
    return f"An essay about {topic}"


@entrypoint(checkpointer=InMemorySaver())
def review_workflow(topic: str) -> dict:
    essay = compose_essay(topic).result()
    review = interrupt({"question": "Please provide a review", "essay": essay})
    return {"essay": essay, "review": review}


def test_the_essay_review_example_streams_and_resumes_as_in_langgraph():
    config = _config("essay")
    first = list(review_workflow.stream("cats", config))
    assert first[0] == {"compose_essay": "An essay about cats"}
    (asked,) = first[1]["__interrupt__"]
    assert asked.value == {"question": "Please provide a review", "essay": "An essay about cats"}
    assert len(first) == 2

    paused = review_workflow.get_state(config)
    assert paused.values is None  # nothing returned yet
    assert paused.next == ("review_workflow",)
    assert paused.metadata["source"] == "input" and paused.metadata["step"] == -1
    assert paused.tasks[0].interrupts == (asked,)

    done = list(review_workflow.stream(Command(resume="This essay is great."), config))
    answer = {"essay": "An essay about cats", "review": "This essay is great."}
    assert done == [{"review_workflow": answer}]
    state = review_workflow.get_state(config)
    assert state.values == answer and state.next == ()
    history = list(review_workflow.get_state_history(config))
    assert [(s.metadata["source"], s.metadata["step"]) for s in history] == [
        ("loop", 0),
        ("input", -1),
    ]


def test_invoke_returns_the_value_and_merges_interrupts_into_a_dict_value():
    config = _config("merge")
    stopped = review_workflow.invoke("cats", config)
    assert list(stopped) == ["__interrupt__"]
    assert review_workflow.invoke(Command(resume="ok"), config) == {
        "essay": "An essay about cats",
        "review": "ok",
    }
    # a second run on the thread stops again: the last value shows, with the interrupt
    again = review_workflow.invoke("dogs", config)
    assert again["essay"] == "An essay about cats"
    assert again["__interrupt__"][0].value["essay"] == "An essay about dogs"


def test_a_value_that_is_not_a_dict_is_not_merged_with_an_interrupt():
    @entrypoint(checkpointer=InMemorySaver())
    def ask(question: str) -> str:
        return interrupt(question)

    config = _config("plain")
    assert list(ask.invoke("a", config)) == ["__interrupt__"]
    assert ask.invoke(Command(resume="ans"), config) == "ans"
    assert list(ask.invoke("b", config)) == ["__interrupt__"]
    assert ask.get_state(config).values == "ans"


def test_parallel_tasks_run_concurrently_and_stream_their_results():
    @task
    def slow_add(a: int, b: int) -> int:
        time.sleep(0.4)
        return a + b

    @entrypoint()
    def parallel(numbers: list[int]) -> list[int]:
        futures = [slow_add(n, 1) for n in numbers]
        return [f.result() for f in futures]

    started = time.monotonic()
    assert parallel.invoke([1, 2, 3]) == [2, 3, 4]
    assert time.monotonic() - started < 1.0  # three 0.4 s tasks at once: not 1.2 s
    chunks = list(parallel.stream([1, 2]))
    assert sorted(chunks[:2], key=lambda c: c["slow_add"]) == [{"slow_add": 2}, {"slow_add": 3}]
    assert chunks[2:] == [{"parallel": [2, 3]}]


def test_previous_and_entrypoint_final_split_the_returned_and_the_saved_value():
    @entrypoint(checkpointer=InMemorySaver())
    def accumulate(n: int, *, previous: int | None = None) -> entrypoint.final[int, int]:
        previous = previous or 0
        return entrypoint.final(value=previous, save=previous + n)

    config = _config("acc")
    assert [accumulate.invoke(n, config) for n in (1, 2, 3)] == [0, 1, 3]
    assert accumulate.get_state(config).values == 3  # what was returned, not what was saved
    assert list(accumulate.stream(4, config)) == [{"accumulate": 6}]
    assert list(accumulate.stream(5, config, stream_mode="values")) == [10]
    steps = [s.metadata["step"] for s in accumulate.get_state_history(config)]
    assert steps == [8, 7, 6, 5, 4, 3, 2, 1, 0, -1]  # two checkpoints a run


def test_update_state_sets_the_value_and_the_next_previous():
    @entrypoint(checkpointer=InMemorySaver())
    def counter(n: int, *, previous: int | None = None) -> int:
        return (previous or 0) + n

    config = _config("upd")
    assert counter.invoke(1, config) == 1
    counter.update_state(config, 100)
    assert counter.get_state(config).values == 100
    assert counter.invoke(1, config) == 101
    counter.update_state(config, entrypoint.final(value=-1, save=7))
    assert counter.get_state(config).values == -1
    assert counter.invoke(1, config) == 8


def test_config_store_and_writer_are_passed_when_declared():
    store = InMemoryStore()

    @entrypoint(checkpointer=InMemorySaver(), store=store)
    def remember(name: str, *, config, store, writer) -> str:
        writer({"progress": name})
        user = config["configurable"]["user"]
        store.put(("users",), user, {"name": name})
        return f"{user}={store.get(('users',), user).value['name']}"

    config = {"configurable": {"thread_id": "inj", "user": "u1"}}
    assert list(remember.stream("ada", config, stream_mode=["custom", "updates"])) == [
        ("custom", {"progress": "ada"}),
        ("updates", {"remember": "u1=ada"}),
    ]


def test_without_a_checkpointer_previous_is_none_and_runs_are_independent():
    @entrypoint()
    def echo(x: int, previous=None) -> tuple:
        return (x, previous)

    assert echo.invoke(1) == (1, None)
    assert echo.invoke(2) == (2, None)


def test_functions_it_cannot_run_are_refused_when_decorated():
    with pytest.raises(ValueError, match="at least one parameter"):

        @entrypoint()
        def nothing() -> int:
            return 1

    with pytest.raises(GraphValidationError, match="'other' has no value"):

        @entrypoint()
        def two(x: int, other: int) -> int:
            return x + other

    with pytest.raises(NotImplementedError, match="Generators"):

        @entrypoint()
        def gen(x: int):
            yield x

    with pytest.raises(ValueError, match="is sync"):

        @entrypoint(timeout=1)
        def timed(x: int) -> int:
            return x


def test_calling_a_task_outside_a_running_workflow_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="outside a running entrypoint"):
        compose_essay("cats")


def test_top_level_exports():
    import threadline

    assert threadline.task is task and threadline.entrypoint is entrypoint


def test_a_task_that_is_never_awaited_still_finishes_before_the_run_returns():
    done: list[str] = []

    @task
    def audit(event: str) -> None:
        time.sleep(0.2)
        done.append(event)

    @entrypoint()
    def fire_and_forget(event: str) -> str:
        audit(event)
        return "returned"

    assert fire_and_forget.invoke("login") == "returned"
    assert done == ["login"]


def test_runtime_is_passed_with_previous_when_declared():
    @entrypoint(checkpointer=InMemorySaver())
    def count(n: int, *, runtime) -> int:
        return (runtime.previous or 0) + n

    config = _config("runtime")
    assert count.invoke(2, config) == 2
    assert count.invoke(3, config) == 5
