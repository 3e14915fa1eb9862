"""How a trace batch is stored: step marks that count on from the previous mark's id, kinds as
small ints, a node's task id as its index in the step (or the bytes its hex spells); and every
entry reads back exactly."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TypedDict

import ormsgpack
import pytest

from threadline import END, START, StateGraph
from threadline.checkpoint import Checkpoint, CheckpointRecord, TaskWrite, new_checkpoint_id
from threadline.errors import SerializationError
from threadline.runtime.trace import RunTrace, trace_entries

TAIL = "-8123-456789abcdef"  # the last 18 characters of a UUIDv7 id, as one process makes them


@dataclass
class Ctx:
    """What ``RunTrace.event`` reads of a running task."""

    task_id: str
    name: str


def cp(checkpoint_id: str, step: int, parent: str | None = None) -> Checkpoint:
    return Checkpoint(checkpoint_id, parent, step, {}, {}, (), "")


def v7(ms: int, counter: int, tail: str = TAIL) -> str:
    return f"{ms >> 16:08x}-{ms & 0xFFFF:04x}-{0x7000 | counter:04x}{tail}"


def saved(trace: RunTrace, carrier: Checkpoint) -> tuple[list, list]:
    """The batch ``carrier`` carries: its stored items, and its entries read back."""
    (write,) = trace.take(carrier)
    record = CheckpointRecord("t", "", carrier, {}, (write,))
    value = write.value if type(write.value) is bytes else write.value[0]
    return ormsgpack.unpackb(value)[2:], trace_entries(record)


def steps_through(checkpoints: list[Checkpoint]) -> tuple[list, list]:
    """One event in the step that starts from each checkpoint (named after its place)."""
    trace = RunTrace()
    for index, checkpoint in enumerate(checkpoints):
        trace.at(checkpoint)
        trace.event(Ctx("ab" * 16, f"e{index}"), f"e{index}", None)
    carrier = checkpoints[-1]
    return saved(trace, cp(new_checkpoint_id(), carrier.step + 1, carrier.id))


def test_ids_made_in_a_row_are_marked_with_an_int_each():
    ids = []
    for _ in range(60):
        ids.append(new_checkpoint_id())
        time.sleep(0.0001)  # a few milliseconds in all: marks in and across milliseconds
    checkpoints = [cp(checkpoint_id, step) for step, checkpoint_id in enumerate(ids)]
    items, entries = steps_through(checkpoints)

    marks = [item for item in items if type(item) is int or len(item) == 2]
    assert marks[0] == [ids[0], 1]  # the first in full, the others as ints
    assert all(type(mark) is int for mark in marks[1:])
    assert [(e.checkpoint_id, e.step) for e in entries] == [(c.id, c.step + 1) for c in checkpoints]


def test_marks_of_any_ids_read_back_exactly():
    ms = 0x0190_0000_0000
    ids = [
        v7(ms, 0),
        v7(ms, 1),  # the id made next
        v7(ms, 0xFFF),  # the last counter of a millisecond
        v7(ms + 1, 0),  # the next millisecond (after the counter ran out)
        v7(ms + 9, 5),
        v7(ms + 9, 6, "-9aaa-bbbbbbbbbbbb"),  # another process's
        v7(ms + 9, 7, "-9aaa-bbbbbbbbbbbb").upper(),  # not as new_checkpoint_id writes it
        v7(ms + 9, 8, "-9aaa-bbbbbbbbbbbb"),
        "0190000a-0000-4000-8000-000000000000",  # a UUIDv4's
        "0190000a-0000-4001-8000-000000000000",  # (only v7 ids count on from the previous)
        "my-checkpoint",
        v7(ms + 10, 3),
        v7(ms + 10, 2),  # earlier than the previous mark's
    ]
    steps = list(range(len(ids)))
    steps[4] = 7  # a step that does not follow the previous one
    checkpoints = [cp(i, s) for i, s in zip(ids, steps, strict=True)]
    _, entries = steps_through(checkpoints)
    assert [(e.name, e.checkpoint_id, e.step) for e in entries] == [
        (f"e{index}", c.id, c.step + 1) for index, c in enumerate(checkpoints)
    ]


def test_a_mark_given_twice_in_a_row_is_stored_once():
    trace, first = RunTrace(), cp(v7(0x0190_0000_0000, 4), 3)
    trace.at(first)
    trace.event(Ctx("ab" * 16, "answer"), "resumed", None)
    trace.at(first)  # (the step runs from the checkpoint the answer was given at)
    trace.event(Ctx("ab" * 16, "node"), "ran", None)
    items, entries = saved(trace, cp(new_checkpoint_id(), 5, first.id))
    assert sum(len(item) == 2 for item in items) == 1
    assert [(e.name, e.checkpoint_id, e.step) for e in entries] == [
        ("resumed", first.id, 4),
        ("ran", first.id, 4),
    ]


def test_task_ids_are_stored_as_bytes_only_when_that_is_exact():
    hexdigest = "0123456789abcdef" * 2
    others = [hexdigest.upper(), "0123456789ab cdef" * 2, "task-1", "", "abc"]
    trace = RunTrace()
    trace.at(cp(new_checkpoint_id(), 0))
    for task_id in [hexdigest, *others]:
        trace.event(Ctx(task_id, "n"), "e", None)
    items, entries = saved(trace, cp(new_checkpoint_id(), 2))
    assert [e.task_id for e in entries] == [hexdigest, *others]
    stored = [item[3] for item in items if type(item) is list and len(item) > 2]
    assert stored[0] == bytes.fromhex(hexdigest)
    assert stored[1:3] == others[:2]  # (no bytes spell them exactly)


class Counter(TypedDict):
    n: int


def test_a_run_of_quick_steps_stores_few_bytes_a_step(saver):
    steps = 200
    graph = StateGraph(Counter)
    graph.add_node("inc", lambda s: {"n": s["n"] + 1})
    graph.add_edge(START, "inc")
    graph.add_conditional_edges("inc", lambda s: END if s["n"] >= steps else "inc")
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 2 * steps}
    app.invoke({"n": 0}, config)

    batches = [w.value for r in saver.list("t") for w in r.pending_writes if w.kind == "trace"]
    assert sum(len(batch) for batch in batches) / steps < 25  # (95 with ids in full)
    history = {s.metadata["step"]: s for s in app.get_state_history(config)}
    entries = app.get_trace(config)
    assert [(e.step, e.checkpoint_id) for e in entries] == [
        (step, history[step - 1].config["configurable"]["checkpoint_id"])
        for step in range(1, steps + 1)
    ]
    # each node's id, stored as its index in the step, is the id of the task the step ran
    assert [(e.kind, e.task_id) for e in entries] == [
        ("node", history[step - 1].tasks[0].id) for step in range(1, steps + 1)
    ]
    node_items = [
        item
        for batch in batches
        for item in ormsgpack.unpackb(batch)[2:]
        if type(item) is list and len(item) > 2
    ]
    assert {item[3] for item in node_items} == {0}


def test_a_batch_of_another_format_is_refused_clearly():
    carrier = cp(new_checkpoint_id(), 1)
    write = TaskWrite("w", "", "trace", ormsgpack.packb([1, 0, ["x", 1]]))
    record = CheckpointRecord("t", "", carrier, {}, (write,))
    with pytest.raises(SerializationError, match=r"format 1, .* reads 2"):
        trace_entries(record)


def test_marks_held_over_to_the_next_batch_read_back_exactly():
    first, second, third = (cp(new_checkpoint_id(), step) for step in (0, 1, 2))
    trace = RunTrace()
    trace.at(first)
    trace.event(Ctx("ab" * 16, "a"), "a", None)
    trace.at(second)  # a step that made no entry before the batch was taken
    _, taken = saved(trace, cp(new_checkpoint_id(), 2, second.id))
    trace.at(third)
    trace.event(Ctx("ab" * 16, "c"), "c", None)
    items, later = saved(trace, cp(new_checkpoint_id(), 3, third.id))
    assert items[0] == [second.id, 2] and type(items[1]) is int  # (held over in full)
    assert [(e.name, e.checkpoint_id, e.step) for e in taken + later] == [
        ("a", first.id, 1),
        ("c", third.id, 3),
    ]
