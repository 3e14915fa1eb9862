"""``entrypoint.final``: return one value to the caller and keep another for the next run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from threadline.constants import END

R = TypeVar("R")
S = TypeVar("S")

PREVIOUS = "__previous__"


@dataclass(frozen=True, slots=True)
class final(Generic[R, S]):
    """Return ``value`` to the caller, but save ``save`` as the next run's ``previous``."""

    value: R
    save: S


def state_update(value: Any) -> dict[str, Any]:
    """What an entrypoint's return value writes: the value shown, and the value kept."""
    if isinstance(value, final):
        return {END: value.value, PREVIOUS: value.save}
    return {END: value, PREVIOUS: value}
