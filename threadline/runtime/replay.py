"""``invoke(None, config)`` addressed at a checkpoint: replay it on a new branch, or go on.

As in LangGraph, a replay first saves a ``fork`` checkpoint: a child copy of the addressed one,
one step later, from which every later node runs again. A checkpoint that was itself made to
start a branch (``update_state`` or an earlier replay) and is still the thread's newest needs no
copy: the run simply goes on from it.
"""

from __future__ import annotations

import dataclasses

from threadline.checkpoint.base import Checkpoint, CheckpointRecord, TaskWrite
from threadline.constants import START
from threadline.runtime.task_ids import task_id

BRANCH_SOURCES = ("update", "fork")


def may_continue_at(record: CheckpointRecord) -> bool:
    """Whether going on from ``record`` without a fork is possible, if it is still the newest."""
    return record.metadata.get("source") in BRANCH_SOURCES


def fork_of(record: CheckpointRecord, new_id: str, created_at: str) -> Checkpoint:
    base = record.checkpoint
    return dataclasses.replace(
        base, id=new_id, parent_id=base.id, step=base.step + 1, created_at=created_at
    )


def carried_inputs(record: CheckpointRecord, fork: Checkpoint) -> list[TaskWrite]:
    """A run's input, carried to a fork of its ``input`` checkpoint.

    Replaying re-runs the nodes after a checkpoint, but the START task is not a node: what it
    produces is the input given to ``invoke``, saved as its result, so the fork keeps it.
    """
    base = record.checkpoint
    saved = {(w.task_id, w.kind): w for w in record.pending_writes}
    carried = []
    for index, planned in enumerate(base.next):
        write = saved.get((task_id(base.id, index, START), "result"))
        if planned.name == START and write is not None:
            new_id = task_id(fork.id, index, START)
            carried.append(TaskWrite(new_id, START, "result", write.value))
    return carried
