"""Managed values: state keys the graph computes for each step instead of storing them.

Declare one in a state schema, as in LangGraph::

    class State(TypedDict):
        messages: list
        remaining_steps: RemainingSteps  # supersteps left before the recursion limit
        is_last_step: IsLastStep  # True in the last step the limit allows

Nodes and conditional edges read them like any key; they are never saved, returned, streamed
or written.
"""

from threadline.managed.is_last_step import (
    IsLastStep,
    IsLastStepManager,
    ManagedValue,
    RemainingSteps,
    RemainingStepsManager,
)

__all__ = [
    "IsLastStep",
    "IsLastStepManager",
    "ManagedValue",
    "RemainingSteps",
    "RemainingStepsManager",
]
