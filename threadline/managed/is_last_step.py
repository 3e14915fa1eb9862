"""``RemainingSteps`` and ``IsLastStep``: how far a run is from its recursion limit.

The module keeps LangGraph's name (``langgraph.managed.is_last_step``) so that imports of it
carry over. The values follow LangGraph's arithmetic: a run that starts from a checkpoint of
step ``s`` (``-2`` on a new thread) counts down to ``stop = s + 2 + recursion_limit``; a task of
step ``t`` (it makes the checkpoint of step ``t``) sees ``stop - t`` remaining steps, and is the
last step when that is 1. So the first node of a run given input sees ``recursion_limit - 1``
(the input and START steps count), the first node of a resumed run ``recursion_limit + 1``.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Annotated, Any


class ManagedValue:
    """A state key whose value the run computes for each step (subclasses say how)."""

    @staticmethod
    def value(step: int, stop: int) -> Any:
        raise NotImplementedError


class RemainingStepsManager(ManagedValue):
    @staticmethod
    def value(step: int, stop: int) -> int:
        return stop - step


class IsLastStepManager(ManagedValue):
    @staticmethod
    def value(step: int, stop: int) -> bool:
        return step == stop - 1


RemainingSteps = Annotated[int, RemainingStepsManager]
IsLastStep = Annotated[bool, IsLastStepManager]


def managed_value_of(hint: Any) -> type[ManagedValue] | None:
    """The manager of a ``Annotated[..., SomeManager]`` schema annotation, else None."""
    if typing.get_origin(hint) is not Annotated:
        return None
    for extra in hint.__metadata__:
        if isinstance(extra, type) and issubclass(extra, ManagedValue):
            return extra
    return None


def with_managed(
    values: dict[str, Any], managed: Mapping[str, type[ManagedValue]], step: int, stop: int
) -> dict[str, Any]:
    """``values`` and the managed keys' values for the tasks of ``step`` (``values`` itself
    when the schema has no managed keys)."""
    if not managed:
        return values
    return {**values, **{key: manager.value(step, stop) for key, manager in managed.items()}}
