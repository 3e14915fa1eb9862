"""What the tasks of a step are given: the run's one ``StepEnv``, moved to the values the step
starts from (with its managed values), and the resume answers meant for each task.

The loop decides which tasks run and what becomes of their outcomes; ``StepSetup`` makes the
``Execute`` effect that runs them, and hands back the ``@task`` results held for the run's end.
"""

from __future__ import annotations

from typing import Any

from threadline.checkpoint.base import BaseSaver, Checkpoint, TaskWrite, WriteKind
from threadline.graph.spec import GraphSpec
from threadline.managed.is_last_step import with_managed
from threadline.runtime.calls import StepCalls
from threadline.runtime.chunks import Put, live_outlets
from threadline.runtime.context import SpareAnswer
from threadline.runtime.effects import Execute
from threadline.runtime.settings import RunSettings
from threadline.runtime.task import StepEnv, Task
from threadline.store.base import BaseStore

SPARE_ANSWER_TASK = "__resume__"  # task id of a resume value no waiting interrupt took


class StepSetup:
    """The tasks' side of one run's steps."""

    def __init__(
        self, spec: GraphSpec, saver: BaseSaver | None, store: BaseStore | None, s: RunSettings
    ) -> None:
        self.spec = spec
        # A checkpointer=False subgraph saves nothing, but its tasks' calls use the parent's
        self.saver = saver if saver is not None else s.lent_saver
        self.store = store
        self.s = s
        self.put: Put | None = None  # takes the chunks made while tasks run, when any stream
        self._env: StepEnv | None = None  # made at the first step; its values change

    def env(self, values: dict[str, Any], checkpoint_id: str) -> StepEnv:
        """What the tasks of a step share; made once per run."""
        env = self._env
        if env is None:
            outlets = live_outlets(self.s, self.put)
            env = self._env = StepEnv.of_run(self.spec, self.saver, self.store, self.s, outlets)
        env.values, env.checkpoint_id = values, checkpoint_id
        return env

    def execute(
        self,
        runnable: list[Task],
        cp: Checkpoint,
        writes: dict[tuple[str, WriteKind], TaskWrite],
        stop: int,
    ) -> Execute:
        """The effect that runs ``runnable`` on ``cp``, each task given the resume answers meant
        for it (in ``writes``, the step's kept writes, or from the parent's run); ``stop``: the
        last step the run may take, which managed values such as ``RemainingSteps`` count to."""
        s = self.s
        parent_answers = s.parent_answers
        if writes or parent_answers:
            for task in runnable:
                resume = writes.get((task.id, "resume"))
                if resume is not None or parent_answers:
                    task.answers = {**parent_answers, **(resume.value if resume else {})}
        spare = writes.get((SPARE_ANSWER_TASK, "resume")) if writes else None
        if s.trace is not None:
            s.trace.at(cp)
        managed = self.spec.schema.managed  # computed for each step
        values = with_managed(cp.values, managed, cp.step + 1, stop) if managed else cp.values
        env = self.env(values, cp.id)
        env.spare = SpareAnswer(spare.value) if spare is not None else s.parent_spare
        if env.calls is None:
            env.calls = StepCalls(env.saver, s.thread_id, s.ns, s.durability)
        env.calls.at(cp.id, writes)
        return Execute(runnable, env)

    def held(self) -> list[TaskWrite]:
        """The ``@task`` results held until the run exits (``durability="exit"``), taken."""
        calls = self._env.calls if self._env is not None else None
        return calls.take_held() if calls is not None and calls.held else []
