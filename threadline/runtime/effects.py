"""The effects the run loop yields, which a driver carries out (``drivers.py``).

A closed set: load a checkpoint, save one, save a step's writes, run tasks, emit a stream chunk
(``Emit``, made in ``chunks.py``). The loop never does I/O itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from threadline.checkpoint.base import CheckpointRecord, TaskWrite
from threadline.runtime.chunks import Emit
from threadline.runtime.task import StepEnv, Task


@dataclass(frozen=True, slots=True)
class Load:
    checkpoint_id: str | None


@dataclass(slots=True)
class Save:
    record: CheckpointRecord
    fork: bool = False


@dataclass(slots=True)
class SaveWrites:
    checkpoint_id: str
    writes: tuple[TaskWrite, ...]


@dataclass(slots=True)
class Execute:
    tasks: list[Task]
    env: StepEnv


Effect = Load | Save | SaveWrites | Execute | Emit
