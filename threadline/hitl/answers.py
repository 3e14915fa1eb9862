"""Checking an answer against what its interrupt asked for, before anything runs.

``Command(resume=...)`` calls ``checked_answers`` for interrupts that carry a schema: an
invalid answer raises ``InvalidAnswerError`` and nothing is saved, so the interrupt stays
pending; a valid one is stored in its JSON form (see ``jsonable``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from threadline.hitl.review_answers import REVIEW_MARK, review_answer
from threadline.hitl.validation import problems, raise_problems
from threadline.types import Interrupt


def checked_answers(answers: dict[str, Any], pending: Iterable[Interrupt]) -> dict[str, Any]:
    """``answers`` (by interrupt id) with each answer to an interrupt with a schema checked
    and put in its stored form."""
    asked = {i.id: (i.schema, i.value) for i in pending if i.schema is not None}
    return {
        iid: answer if iid not in asked else checked_answer(*asked[iid], answer, iid)
        for iid, answer in answers.items()
    }


def checked_answer(schema: dict[str, Any], question: Any, answer: Any, interrupt_id: str) -> Any:
    """The stored form of ``answer`` to the interrupt that asked ``question`` with ``schema``."""
    if schema.get(REVIEW_MARK):
        return review_answer(question, answer, interrupt_id)
    answer = jsonable(answer)
    raise_problems(interrupt_id, problems(schema, answer))
    return answer


def jsonable(value: Any) -> Any:
    """An answer in JSON form, as a UI would send it: model and dataclass instances become
    dicts, dates ISO strings, enums their values. Stored this way, it needs no registered class
    to be loaded again."""
    try:
        from pydantic_core import PydanticSerializationError, to_jsonable_python
    except ImportError:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.asdict(value)
        return value
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError:
        return value  # not JSON-like at all: the schema check says what is wrong
