"""A finished ``@task`` never runs again for the same caller run: after an interrupt, a failure,
with every saver and durability mode, inside an entrypoint or a graph node."""

from __future__ import annotations

import asyncio
import operator
import time
from pathlib import Path
from typing import Annotated, TypedDict

import pytest

from threadline import END, START, Command, RetryPolicy, StateGraph, interrupt
from threadline.checkpoint import BaseSaver, FileSaver, SqliteSaver
from threadline.errors import NonDeterminismError, SaverUnavailableError
from threadline.func import entrypoint, get_task_context, task


class Ledger:
    """Side effects counted in a file, as a real one (an email, a payment) would be."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, entry: str) -> None:
        with self.path.open("a") as f:
            f.write(entry + "\n")

    def entries(self) -> list[str]:
        return self.path.read_text().split() if self.path.exists() else []


def _config(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


def approval_flow(saver: BaseSaver, ledger: Ledger):
    @task
    def send_email(to: str) -> str:
        ledger.add(f"email:{to}")
        return f"sent to {to}"

    @entrypoint(checkpointer=saver)
    def approve(to: str) -> dict:
        receipt = send_email(to).result()  # the side effect before interrupt(): in a task
        decision = interrupt({"receipt": receipt})
        return {"receipt": receipt, "decision": decision}

    return approve


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_side_effect_before_an_interrupt_runs_once_across_the_resume(saver, tmp_path, durability):
    ledger = Ledger(tmp_path / "ledger")
    approve = approval_flow(saver, ledger)
    config = _config()
    stopped = approve.invoke("ada", config, durability=durability)
    assert stopped["__interrupt__"][0].value == {"receipt": "sent to ada"}
    assert approve.invoke(Command(resume="yes"), config, durability=durability) == {
        "receipt": "sent to ada",
        "decision": "yes",
    }
    assert ledger.entries() == ["email:ada"]


def test_without_a_task_the_side_effect_repeats_on_resume(tmp_path):
    """What docs/durability.md warns about: code before interrupt() runs again."""
    ledger = Ledger(tmp_path / "ledger")
    with SqliteSaver(tmp_path / "db.sqlite") as saver:

        @entrypoint(checkpointer=saver)
        def approve(to: str) -> str:
            ledger.add(f"email:{to}")
            return interrupt("ok?")

        approve.invoke("ada", _config())
        approve.invoke(Command(resume="yes"), _config())
    assert ledger.entries() == ["email:ada", "email:ada"]


def test_sync_durability_saves_the_result_before_the_caller_gets_it(tmp_path):
    with SqliteSaver(tmp_path / "db.sqlite") as saver:
        seen: list[tuple[str, str]] = []

        @task
        def charge(amount: int) -> str:
            return f"charged {amount}"

        @entrypoint(checkpointer=saver)
        def pay(amount: int) -> str:
            receipt = charge(amount).result()
            record = saver.get_tuple("t")  # the checkpoint this step runs from
            seen.extend((w.task_name, w.value) for w in record.pending_writes)
            return receipt

        assert pay.invoke(5, _config()) == "charged 5"
        assert seen == [("charge", "charged 5")]


def test_exit_durability_keeps_task_results_only_where_the_run_stops(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    with SqliteSaver(tmp_path / "db.sqlite") as saver:
        approve = approval_flow(saver, ledger)
        approve.invoke("ada", _config(), durability="exit")
        (record,) = saver.list("t")  # only where it stopped: the input checkpoint
        kinds = [w.kind for w in record.pending_writes]
        assert kinds == ["task", "interrupt", "trace"]  # the trace goes with them
        approve.invoke(Command(resume="no"), _config(), durability="exit")
        assert [s.metadata["step"] for s in approve.get_state_history(_config())] == [0, -1]
    assert ledger.entries() == ["email:ada"]


def test_after_a_failure_invoke_none_reruns_only_the_tasks_that_had_not_finished(saver, tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    outage = {"on": True}

    @task
    def reserve(item: str) -> str:
        ledger.add(f"reserve:{item}")
        return f"R-{item}"

    @task
    def ship(reservation: str) -> str:
        ledger.add(f"ship:{reservation}")
        if outage["on"]:
            raise ValueError("carrier down")
        return f"shipped {reservation}"

    @entrypoint(checkpointer=saver)
    def order(item: str) -> str:
        return ship(reserve(item).result()).result()

    with pytest.raises(ValueError, match="carrier down"):
        order.invoke("book", _config())
    failed = order.get_state(_config())
    assert failed.next == ("order",) and "carrier down" in failed.tasks[0].error
    outage["on"] = False
    assert order.invoke(None, _config()) == "shipped R-book"
    assert ledger.entries() == ["reserve:book", "ship:R-book", "ship:R-book"]


def test_a_task_in_a_graph_node_survives_an_interrupt_in_the_same_node(saver, tmp_path):
    ledger = Ledger(tmp_path / "ledger")

    @task
    def book_flight(city: str) -> str:
        ledger.add(f"flight:{city}")
        return f"flight to {city}"

    class Trip(TypedDict):
        city: str
        log: Annotated[list[str], operator.add]

    def plan(state: Trip) -> dict:
        booking = book_flight(state["city"]).result()
        ok = interrupt(f"confirm {booking}?")
        return {"log": [f"{booking}: {ok}"]}

    g = StateGraph(Trip)
    g.add_node("plan", plan)
    g.add_edge(START, "plan")
    g.add_edge("plan", END)
    app = g.compile(checkpointer=saver)
    app.invoke({"city": "Oslo", "log": []}, _config())
    assert app.invoke(Command(resume="yes"), _config()) == {
        "city": "Oslo",
        "log": ["flight to Oslo: yes"],
    }
    assert ledger.entries() == ["flight:Oslo"]


def test_each_call_of_a_node_is_its_own_task_call(tmp_path):
    ledger = Ledger(tmp_path / "ledger")

    @task
    def notify(who: str) -> str:
        ledger.add(who)
        return who

    with SqliteSaver(tmp_path / "db.sqlite") as saver:

        @entrypoint(checkpointer=saver)
        def broadcast(people: list[str]) -> list[str]:
            done = [notify(p).result() for p in people]
            interrupt("all notified?")
            return done

        broadcast.invoke(["a", "b", "a"], _config())
        assert broadcast.invoke(Command(resume=True), _config()) == ["a", "b", "a"]
        broadcast.invoke(["c"], _config())  # a new run: calls of the new step run
    assert ledger.entries() == ["a", "b", "a", "c"]


def test_a_retry_policy_retries_a_task_and_keeps_its_earlier_siblings(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    attempts = {"n": 0}

    @task(retry_policy=RetryPolicy(initial_interval=0.01, jitter=False, max_attempts=3))
    def flaky(x: int) -> int:
        attempts["n"] += 1
        ledger.add(f"attempt:{get_task_context().attempt}")
        if attempts["n"] < 3:
            raise ConnectionError("reset by peer")
        return x * 2

    @task(retry_policy=RetryPolicy(retry_on=KeyError, initial_interval=0.01))
    def strict(x: int) -> int:
        raise ValueError("not retried")

    @entrypoint()
    def compute(x: int) -> int:
        return flaky(x).result()

    assert compute.invoke(21) == 42
    assert ledger.entries() == ["attempt:1", "attempt:2", "attempt:3"]

    @entrypoint()
    def refuse(x: int) -> int:
        return strict(x).result()

    with pytest.raises(ValueError, match="not retried"):
        refuse.invoke(1)


def test_the_idempotency_key_is_stable_across_reruns_and_unique_per_call(tmp_path):
    keys: list[tuple[str, str]] = []
    outage = {"on": True}

    @task
    def pay(who: str) -> str:
        info = get_task_context()
        keys.append((who, info.idempotency_key))
        if who == "bob" and outage["on"]:
            raise ValueError("gateway timeout")
        return info.idempotency_key

    with SqliteSaver(tmp_path / "db.sqlite") as saver:

        @entrypoint(checkpointer=saver)
        def payroll(people: list[str]) -> list[str]:
            return [pay(p).result() for p in people]

        with pytest.raises(ValueError):
            payroll.invoke(["ada", "bob"], _config())
        outage["on"] = False
        result = payroll.invoke(None, _config())
    (ada, ada_key), (bob, bob_key), (bob_again, bob_key_again) = keys
    assert (ada, bob, bob_again) == ("ada", "bob", "bob")  # ada's payment did not run again
    assert bob_key == bob_key_again and ada_key != bob_key
    assert result == [ada_key, bob_key]


def test_calling_other_tasks_than_the_saved_run_raises_non_determinism(tmp_path):
    version = {"first": "fetch"}

    @task
    def fetch(x: int) -> str:
        return f"fetched {x}"

    @task
    def compute(x: int) -> str:
        return f"computed {x}"

    with SqliteSaver(tmp_path / "db.sqlite") as saver:

        @entrypoint(checkpointer=saver)
        def job(x: int) -> str:
            first = fetch if version["first"] == "fetch" else compute
            value = first(x).result()
            return f"{value}, {interrupt('go on?')}"

        job.invoke(1, _config())
        version["first"] = "compute"  # the code changed while the thread was paused
        with pytest.raises(NonDeterminismError) as raised:
            job.invoke(Command(resume="yes"), _config())
        assert "'compute'" in str(raised.value) and "'fetch'" in str(raised.value)
        version["first"] = "fetch"
        assert job.invoke(Command(resume="yes"), _config()) == "fetched 1, yes"


def test_an_interrupt_inside_a_task_is_answered_on_resume(tmp_path):
    ledger = Ledger(tmp_path / "ledger")

    @task
    def ask(question: str) -> str:
        ledger.add("asked")
        return interrupt(question)

    @task
    def prepare() -> str:
        ledger.add("prepared")
        return "draft"

    with SqliteSaver(tmp_path / "db.sqlite") as saver:

        @entrypoint(checkpointer=saver)
        def review(topic: str) -> str:
            draft = prepare().result()
            return f"{draft}: {ask(f'approve {topic}?').result()}"

        stopped = review.invoke("x", _config())
        assert stopped["__interrupt__"][0].value == "approve x?"
        assert review.invoke(Command(resume="approved"), _config()) == "draft: approved"
    assert ledger.entries() == ["prepared", "asked", "asked"]


def test_a_task_may_call_tasks(tmp_path):
    ledger = Ledger(tmp_path / "ledger")

    @task
    def leaf(x: int) -> int:
        ledger.add(f"leaf:{x}")
        return x + 1

    @task
    def branch(x: int) -> int:
        return leaf(x).result() + leaf(x * 10).result()

    with SqliteSaver(tmp_path / "db.sqlite") as saver:

        @entrypoint(checkpointer=saver)
        def tree(x: int) -> int:
            total = branch(x).result()
            interrupt("done?")
            return total

        tree.invoke(1, _config())
        assert tree.invoke(Command(resume=True), _config()) == 13
    assert ledger.entries() == ["leaf:1", "leaf:10"]


class FailingTaskWrites(SqliteSaver):
    """A saver that cannot save task results (its disk filled up, say)."""

    def put_writes(self, thread_id, checkpoint_ns, checkpoint_id, writes):
        if any(w.kind == "task" for w in writes):
            raise SaverUnavailableError("disk full")
        super().put_writes(thread_id, checkpoint_ns, checkpoint_id, writes)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_task_result_that_cannot_be_saved_fails_the_run(tmp_path, durability):
    ledger = Ledger(tmp_path / "ledger")
    with FailingTaskWrites(tmp_path / "db.sqlite") as saver:
        approve = approval_flow(saver, ledger)
        with pytest.raises(SaverUnavailableError, match="disk full"):
            approve.invoke("ada", _config(), durability=durability)
        # sync: the caller never got the result; async: it did, but the step does not end
        assert approve.get_state(_config()).next == ("approve",)


@pytest.mark.parametrize("durability", ["sync", "exit"])
def test_a_retried_entrypoint_gets_its_finished_tasks_results(tmp_path, durability):
    ledger = Ledger(tmp_path / "ledger")
    failures = {"left": 1}

    @task
    def fetch(x: int) -> int:
        ledger.add(f"fetch:{x}")
        return x * 3

    with SqliteSaver(tmp_path / "db.sqlite") as saver:

        @entrypoint(
            checkpointer=saver, retry_policy=RetryPolicy(initial_interval=0.01, jitter=False)
        )
        def job(x: int) -> int:
            value = fetch(x).result()
            if failures["left"]:
                failures["left"] -= 1
                raise ConnectionError("lost the database")
            return value

        assert job.invoke(2, _config(), durability=durability) == 6
    assert ledger.entries() == ["fetch:2"]


class SlowPuts(FileSaver):
    """A saver whose checkpoint saves take a while (a slow disk); its put sets the pending
    writes of the checkpoint it saves, dropping any it finds there."""

    def put(self, record, *, fork=False):
        time.sleep(0.2)
        super().put(record, fork=fork)


@pytest.mark.parametrize("run", ["sync", "async"])
def test_async_durability_saves_task_results_after_the_checkpoint_they_belong_to(tmp_path, run):
    """The input checkpoint is still being saved when the task finishes; its result must not
    be written first (and then dropped by that put)."""
    ledger = Ledger(tmp_path / "ledger")
    with SlowPuts(tmp_path / "threads") as saver:
        approve = approval_flow(saver, ledger)
        if run == "sync":
            approve.invoke("ada", _config(), durability="async")
            approve.invoke(Command(resume="yes"), _config(), durability="async")
        else:

            async def both() -> None:
                await approve.ainvoke("ada", _config(), durability="async")
                await approve.ainvoke(Command(resume="yes"), _config(), durability="async")

            asyncio.run(both())
    assert ledger.entries() == ["email:ada"]
