"""The child side of the kill harness: workloads, their side-effect log, and the kill points.

A child process runs one *round* of a trial: it opens the saver, looks at the thread, and
starts it (the input), continues it (``invoke(None)``), or answers its interrupt
(``Command(resume=...)``). Every node and ``@task`` call appends one line to an append-only log
when it does its side effect, so the parent can count executions across processes.

Kill points are named hooks. The round's plan says "SIGKILL yourself at the n-th hit of hook h"
(now, or after a short delay on a timer thread); with no plan the child counts the hits and
times its saves, which the parent uses to aim the kills of later rounds. The saver is wrapped
(in this process only) to place hooks around ``put`` and ``put_writes``, and below them:

- ``node`` / ``task``: inside a node / a task, after its side effect was logged
- ``task-save``: a task has returned, its result is not saved yet
- ``task-saved``: the task's result is saved (in ``sync`` mode its caller does not have it yet)
- ``writes``: before the writes of a step that stops (an interrupt) are saved
- ``put`` / ``put-done``: just before / just after a checkpoint is saved
- ``put-inside``: in the middle of a save (a checkpoint, or task results): before an SQL
  statement of its transaction (SQLite, through ``set_trace_callback``), before an ``fsync``
  or a rename (files); for PostgreSQL and Redis, whose saves are one statement or script, a
  timer fires while it is in flight.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import operator
import os
import signal
import sqlite3
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from threadline import END, START, Command, StateGraph, interrupt
from threadline.checkpoint import BaseSaver, SqliteSaver, from_url
from threadline.func import entrypoint, get_task_context, task

HOOKS = ("node", "task", "task-save", "task-saved", "writes", "put", "put-inside", "put-done")


class Child:
    """One round's process: its log, its kill plan and the hits it counts."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.round = spec["round"]
        self.plan: dict[str, Any] | None = spec.get("plan")
        self.hits: Counter[str] = Counter()
        self.save_seconds: list[float] = []
        self._lock = threading.Lock()
        self._saving = threading.local()
        self._log = os.open(spec["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def effect(self, kind: str, key: str, name: str) -> None:
        """The side effect of a node or a task: one line, one ``write`` (atomic, O_APPEND)."""
        os.write(self._log, f"{self.round} {kind} {key} {name}\n".encode())

    def hook(self, name: str) -> None:
        """A kill point: die here (or start the timer) if this is the planned hit."""
        with self._lock:
            self.hits[name] += 1
            plan = self.plan
            fire = plan is not None and plan["hook"] == name and self.hits[name] == plan["n"]
        if not fire:
            return
        assert plan is not None
        if plan.get("delay") is None:
            os.kill(os.getpid(), signal.SIGKILL)
        timer = threading.Timer(plan["delay"], os.kill, (os.getpid(), signal.SIGKILL))
        timer.daemon = True
        timer.start()

    @property
    def saving(self) -> bool:
        return getattr(self._saving, "on", False)

    def save(self, before: str, after: str | None, fn: Callable[[], Any]) -> Any:
        self.hook(before)
        self._saving.on = True
        started = time.perf_counter()
        try:
            result = fn()
        finally:
            self._saving.on = False
        self.save_seconds.append(time.perf_counter() - started)
        if after is not None:
            self.hook(after)
        return result

    async def asave(self, before: str, after: str | None, coro: Any) -> Any:
        self.hook(before)
        started = time.perf_counter()
        result = await coro
        self.save_seconds.append(time.perf_counter() - started)
        if after is not None:
            self.hook(after)
        return result


# -- the saver, wrapped in this process ----------------------------------------------------------


def open_saver(child: Child) -> BaseSaver:
    backend, url, options = child.spec["backend"], child.spec["url"], child.spec["options"]
    if backend == "sqlite":  # a connection of our own, to trace its statements
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), check_same_thread=False)
        conn.set_trace_callback(lambda _sql: child.saving and child.hook("put-inside"))
        saver: BaseSaver = SqliteSaver(conn)
    else:
        saver = from_url(url, **options)
    if backend == "files":
        _hook_file_ops(child)
    _wrap_saves(saver, child, timed=backend in ("postgres", "redis"))
    if child.spec.get("fault"):
        _break(saver, child.spec["fault"])
    return saver


def _break(saver: BaseSaver, fault: str) -> None:
    """Make the saver wrong on purpose, to show the harness catches it (its own tests)."""
    if fault == "forget-task-results":  # saved task results are not seen when loading
        get_tuple = saver.get_tuple

        def forgetful(*args: Any, **kwargs: Any) -> Any:
            record = get_tuple(*args, **kwargs)
            if record is None:
                return None
            kept = tuple(w for w in record.pending_writes if w.kind != "task")
            return dataclasses.replace(record, pending_writes=kept)

        saver.get_tuple = forgetful  # type: ignore[method-assign]
    elif fault == "orphan-step-2":  # the checkpoint of step 2 names a parent that is not there
        put = saver.put

        def orphaning(record: Any, *, fork: bool = False) -> None:
            if record.checkpoint.step == 2:
                cp = dataclasses.replace(record.checkpoint, parent_id=record.checkpoint.id[:-4])
                record, fork = dataclasses.replace(record, checkpoint=cp), True
            put(record, fork=fork)

        saver.put = orphaning  # type: ignore[method-assign]
    else:
        raise ValueError(f"unknown fault {fault!r}")


def _hook_file_ops(child: Child) -> None:
    """``put-inside`` before each ``fsync`` and ``rename`` a save makes (this process only)."""
    for name in ("fsync", "replace", "rename"):
        real = getattr(os, name)

        def hooked(*args: Any, _real: Callable[..., Any] = real) -> Any:
            if child.saving:
                child.hook("put-inside")
            return _real(*args)

        setattr(os, name, hooked)


def _wrap_saves(saver: BaseSaver, child: Child, *, timed: bool) -> None:
    put, put_writes = saver.put, saver.put_writes
    # A one-round-trip save is hit in flight by a timer started as it begins (``put-inside``).
    before_put = "put-inside" if timed else "put"

    def task_writes(writes: Any) -> bool:
        return any(w.kind == "task" for w in writes)

    def wrapped_put(record: Any, *, fork: bool = False) -> None:
        if timed:
            child.hook("put")
        child.save(before_put, "put-done", lambda: put(record, fork=fork))

    def wrapped_put_writes(thread_id: str, ns: str, cid: str, writes: Any) -> None:
        kind = task_writes(writes)
        child.save(
            "task-save" if kind else "writes",
            "task-saved" if kind else None,
            lambda: put_writes(thread_id, ns, cid, writes),
        )

    saver.put = wrapped_put  # type: ignore[method-assign]
    saver.put_writes = wrapped_put_writes  # type: ignore[method-assign]
    cls = type(saver)
    if cls.aput is not BaseSaver.aput:  # a native async path, which does not call put
        aput, aput_writes = saver.aput, saver.aput_writes

        async def wrapped_aput(record: Any, *, fork: bool = False) -> None:
            if timed:
                child.hook("put")
            await child.asave(before_put, "put-done", aput(record, fork=fork))

        async def wrapped_aput_writes(thread_id: str, ns: str, cid: str, writes: Any) -> None:
            kind = task_writes(writes)
            await child.asave(
                "task-save" if kind else "writes",
                "task-saved" if kind else None,
                aput_writes(thread_id, ns, cid, writes),
            )

        saver.aput = wrapped_aput  # type: ignore[method-assign]
        saver.aput_writes = wrapped_aput_writes  # type: ignore[method-assign]


# -- workloads -----------------------------------------------------------------------------------


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def node_key(name: str, values: Any) -> str:
    """A node execution's identity: its name and the length of the log it was given (the
    parent computes the same from the checkpoint the step started from)."""
    log = values.get("log", []) if isinstance(values, dict) else []
    return f"{name}@{len(log)}"


def _node(child: Child, name: str, body: Callable[[int], list[str]] | None = None) -> Any:
    def run(state: State) -> dict[str, Any]:
        at = len(state.get("log", []))
        child.effect("node", node_key(name, state), name)
        child.hook("node")
        return {"log": body(at) if body is not None else [f"{name}{at}"]}

    run.__name__ = name
    return run


def _task(child: Child, name: str, fn: Callable[..., Any]) -> Any:
    def run(*args: Any) -> Any:
        child.effect("task", get_task_context().idempotency_key, name)
        child.hook("task")
        return fn(*args)

    run.__name__ = name
    return task(run)


def _atask(child: Child, name: str, fn: Callable[..., Any]) -> Any:
    async def run(*args: Any) -> Any:
        child.effect("task", get_task_context().idempotency_key, name)
        await asyncio.sleep(0)
        child.hook("task")
        return fn(*args)

    run.__name__ = name
    return task(run)


def graph(child: Child, saver: BaseSaver) -> Any:
    """Five nodes in four steps, two of them in parallel."""
    g = StateGraph(State)
    for name in "abcde":
        g.add_node(name, _node(child, name))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("a", "c")
    g.add_edge("b", "d")
    g.add_edge("c", "d")
    g.add_edge("d", "e")
    g.add_edge("e", END)
    return g.compile(checkpointer=saver)


def graph_tasks(child: Child, saver: BaseSaver) -> Any:
    """Graph nodes that call tasks: two at once, then one that needs both, then a payment."""
    hotel = _task(child, "hotel", lambda at: f"hotel{at}")
    flight = _task(child, "flight", lambda at: f"flight{at}")
    confirm = _task(child, "confirm", lambda h, f: f"{h}+{f}")
    charge = _task(child, "charge", lambda what: f"paid[{what}]")

    def book(at: int) -> list[str]:
        h, f = hotel(at), flight(at)
        return [confirm(h.result(), f.result()).result()]

    def pay(at: int) -> list[str]:
        return [charge(f"trip{at}").result()]

    g = StateGraph(State)
    g.add_node("plan", _node(child, "plan"))
    g.add_node("book", _node(child, "book", book))
    g.add_node("pay", _node(child, "pay", pay))
    g.add_edge(START, "plan")
    g.add_edge("plan", "book")
    g.add_edge("book", "pay")
    g.add_edge("pay", END)
    return g.compile(checkpointer=saver)


def entry_tasks(child: Child, saver: BaseSaver) -> Any:
    """An entrypoint: three tasks at once, one that sums them, one that calls a nested task."""
    double = _task(child, "double", lambda i: 2 * i)
    total = _task(child, "total", lambda xs: sum(xs))
    stamp = _task(child, "stamp", lambda n: f"#{n}")
    receipt = _task(child, "receipt", lambda n: f"receipt {stamp(n).result()}")

    @entrypoint(checkpointer=saver)
    def order(n: int) -> dict[str, Any]:
        child.effect("node", "order@0", "order")
        child.hook("node")
        items = [f.result() for f in [double(i) for i in range(n)]]
        sum_ = total(items).result()
        return {"items": items, "total": sum_, "receipt": receipt(sum_).result()}

    return order


def async_entry_tasks(child: Child, saver: BaseSaver) -> Any:
    """An async entrypoint whose async tasks run together on the event loop."""
    square = _atask(child, "square", lambda i: i * i)
    label = _atask(child, "label", lambda xs: "+".join(map(str, xs)))

    @entrypoint(checkpointer=saver)
    async def squares(n: int) -> dict[str, Any]:
        child.effect("node", "squares@0", "squares")
        child.hook("node")
        xs = list(await asyncio.gather(*(square(i) for i in range(n))))
        return {"squares": xs, "label": await label(xs)}

    return squares


def approval(child: Child, saver: BaseSaver) -> Any:
    """The issue's case: a side effect, then ``interrupt()``; answered, then another."""
    charge = _task(child, "charge", lambda amount: f"charged {amount}")
    ship = _task(child, "ship", lambda receipt, answer: f"shipped ({receipt}, {answer})")

    @entrypoint(checkpointer=saver)
    def refund(amount: int) -> dict[str, Any]:
        child.effect("node", "refund@0", "refund")
        child.hook("node")
        receipt = charge(amount).result()
        answer = interrupt({"receipt": receipt})
        return {"receipt": receipt, "shipping": ship(receipt, answer).result()}

    return refund


# name -> (builder, input, async?)
WORKLOADS: dict[str, tuple[Callable[[Child, BaseSaver], Any], Any, bool]] = {
    "graph": (graph, {"log": []}, False),
    "graph_tasks": (graph_tasks, {"log": []}, False),
    "entry_tasks": (entry_tasks, 3, False),
    "async_entry_tasks": (async_entry_tasks, 3, True),
    "approval": (approval, 30, False),
}
ANSWER = "yes"


# -- one round -----------------------------------------------------------------------------------


def run_round(spec: dict[str, Any]) -> None:
    """The body of a child process (exit 0 after its round, 3 with a traceback on error)."""
    started = time.perf_counter()
    workdir = Path(spec["workdir"])
    child = Child(spec)
    try:
        saver = open_saver(child)
        build, input_, is_async = WORKLOADS[spec["workload"]]
        flow = build(child, saver)
        if is_async:
            asyncio.run(_around_async(flow, input_, spec))
        else:
            _around(flow, input_, spec)
        saver.close()
    except BaseException:
        (workdir / f"error-{spec['round']}.txt").write_text(traceback.format_exc())
        os._exit(3)
    report = {
        "hits": dict(child.hits),
        "save_seconds": child.save_seconds,
        "seconds": time.perf_counter() - started,
    }
    _write_whole(workdir / f"round-{spec['round']}.json", json.dumps(report))
    os._exit(0)


def _write_whole(path: Path, text: str) -> None:
    """Write ``path`` so a kill (a timer may still fire) leaves it whole or absent."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _next_input(snapshot: Any, input_: Any) -> Any:
    """What continues the thread: the input if it never started, an answer if it waits for
    one, else ``None``; ``...`` when it is finished."""
    if snapshot.created_at is None:
        return input_
    if snapshot.interrupts:
        return Command(resume=ANSWER)
    if snapshot.next:
        return None
    return ...


def _around(flow: Any, input_: Any, spec: dict[str, Any]) -> None:
    config = {"configurable": {"thread_id": spec["thread_id"]}}
    given = _next_input(flow.get_state(config), input_)
    if given is not ...:
        flow.invoke(given, config, durability=spec["durability"])
    _finish(flow.get_state(config), spec)


async def _around_async(flow: Any, input_: Any, spec: dict[str, Any]) -> None:
    config = {"configurable": {"thread_id": spec["thread_id"]}}
    given = _next_input(await flow.aget_state(config), input_)
    if given is not ...:
        await flow.ainvoke(given, config, durability=spec["durability"])
    _finish(await flow.aget_state(config), spec)


def _finish(snapshot: Any, spec: dict[str, Any]) -> None:
    if _next_input(snapshot, None) is ...:
        _write_whole(Path(spec["workdir"]) / "final.json", json.dumps(snapshot.values))
