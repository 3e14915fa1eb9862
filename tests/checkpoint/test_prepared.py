"""What the core hands a backend for a put (``backend.Prepared``), seen before any commit."""

from __future__ import annotations

import pytest
from builders import step, w
from toy_backend import DictRowsSaver

from threadline.checkpoint import PlannedTask, TaskWrite, ThreadStatus
from threadline.checkpoint.base import thread_status

PLANS = (PlannedTask("node"),)


@pytest.mark.parametrize(
    ("ns", "next", "writes", "status"),
    [
        ("", (), (), "idle"),
        ("", PLANS, (), "running"),
        ("", PLANS, (w("t", "interrupt"),), "interrupted"),
        ("", PLANS, (w("t", "error"),), "error"),
        ("", PLANS, (w("t", "error"), w("t", "result")), "running"),
        ("sub", PLANS, (w("t", "interrupt"),), None),
    ],
)
def test_a_put_carries_the_threads_new_status_in_the_root_namespace_only(
    ns: str, next: tuple[PlannedTask, ...], writes: tuple[TaskWrite, ...], status: ThreadStatus
) -> None:
    record = step("t1", {"n": 1}, None, ns=ns, next=next, writes=writes)
    prepared = DictRowsSaver()._prepare(record, False)
    assert prepared.status == status
    if ns == "":
        assert status == thread_status(record.checkpoint, record.pending_writes)


def test_a_put_whose_body_holds_every_value_relies_on_nothing() -> None:
    record = step("t1", {"n": 1, "s": "short"}, None)
    prepared = DictRowsSaver()._prepare(record, False)
    assert (prepared.refs, prepared.blobs, prepared.check, prepared.deltas) == ({}, (), (), ())
    mixed = step("t1", {"n": 1, "big": "b" * 1000}, None)
    prepared = DictRowsSaver()._prepare(mixed, False)
    assert prepared.refs == {"big": mixed.checkpoint.versions["big"]}
