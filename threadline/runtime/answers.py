"""Which interrupts of a step still wait, and which answer goes to which of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from threadline.checkpoint.base import TaskWrite, WriteKind
from threadline.errors import AmbiguousResumeError
from threadline.types import Interrupt


def pending_interrupts(writes: Iterable[TaskWrite]) -> list[tuple[TaskWrite, Interrupt]]:
    """Interrupts of tasks that have not finished since, in the order they were saved."""
    writes = list(writes)
    finished = {w.task_id for w in writes if w.kind == "result"}
    return [
        (w, i)
        for w in writes
        if w.kind == "interrupt" and w.task_id not in finished
        for i in w.value
    ]


def match_answers(resume: Any, pending: list[tuple[TaskWrite, Interrupt]]) -> dict[str, Any]:
    """A map ``{interrupt_id: value}``, or a bare value when exactly one interrupt waits."""
    ids = [i.id for _, i in pending]
    if isinstance(resume, dict) and resume and all(k in ids for k in resume):
        return _checked(dict(resume), pending)
    if len(pending) == 1:
        return _checked({ids[0]: resume}, pending)
    raise AmbiguousResumeError(
        f"{len(pending)} interrupts are waiting; resume with a dict mapping interrupt id to value "
        f"(ids: {', '.join(ids)}). Nothing was resumed."
    )


def resume_writes(
    answers: Mapping[str, Any],
    pending: list[tuple[TaskWrite, Interrupt]],
    writes: Mapping[tuple[str, WriteKind], TaskWrite],
) -> list[TaskWrite]:
    """The ``resume`` write of each task an answer is for: its earlier answers (in ``writes``)
    and the new ones, by interrupt id."""
    by_task: dict[str, TaskWrite] = {}
    for write, intr in pending:
        if intr.id not in answers:
            continue
        current = by_task.get(write.task_id) or writes.get((write.task_id, "resume"))
        merged = {**(current.value if current else {}), intr.id: answers[intr.id]}
        by_task[write.task_id] = TaskWrite(write.task_id, write.task_name, "resume", merged)
    return list(by_task.values())


def _checked(answers: dict[str, Any], pending: list[tuple[TaskWrite, Interrupt]]) -> dict[str, Any]:
    """Answers to interrupts asked with a schema are checked before any is saved: an invalid
    one raises ``InvalidAnswerError`` and the thread stays as it was."""
    if all(i.schema is None for _, i in pending):
        return answers
    from threadline.hitl.answers import checked_answers

    return checked_answers(answers, (i for _, i in pending))
