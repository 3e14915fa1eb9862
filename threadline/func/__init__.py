"""The functional API: ``@entrypoint`` workflows made of ``@task`` calls.

A task's result is saved when it returns; when its caller runs again (after an interrupt, a
failure or a crash) the call returns the saved result instead of running again.
See ``docs/durability.md``.
"""

from threadline.func.call import CallInfo, TaskFuture
from threadline.func.entrypoint import entrypoint
from threadline.func.graph import FunctionalGraph
from threadline.func.info import get_task_context
from threadline.func.task import TaskFunction, task

__all__ = [
    "CallInfo",
    "FunctionalGraph",
    "TaskFunction",
    "TaskFuture",
    "entrypoint",
    "get_task_context",
    "task",
]
