"""The superstep loop, written once for sync and async runs.

``RunLoop.run`` is a generator: it yields effects (load, save, run these tasks, emit a stream
chunk) and receives their results. ``drivers.py`` carries the effects out with sync or async
I/O, so the control flow below exists exactly once and can be tested without any saver.

A run starts from a checkpoint (or from new input, which makes an ``input`` checkpoint whose
START task holds the input), then repeats: plan the tasks of the checkpoint, run those without a
saved result, apply every result through the reducers in task order, save the next checkpoint.
Resume, replay and recovery after a crash are the same loop started from a saved checkpoint.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from threadline import serde
from threadline.checkpoint.base import (
    BaseSaver,
    CheckpointRecord,
    PlannedTask,
    TaskWrite,
)
from threadline.checkpoint.changes import SET
from threadline.checkpoint.ids import new_checkpoint_id, run_local_ids
from threadline.clock import now_iso
from threadline.constants import INTERRUPT_KEY, START
from threadline.errors import (
    CheckpointNotFoundError,
    GraphDrained,
    GraphInterrupt,
    GraphRecursionError,
    InvalidUpdateError,
    NothingToResumeError,
    ParentCommand,
    ResumeWithoutCheckpointerError,
    SerializationError,
    ThreadlineError,
)
from threadline.graph.spec import GraphSpec
from threadline.runtime import command_input
from threadline.runtime.answers import match_answers, pending_interrupts, resume_writes
from threadline.runtime.chunks import Chunks, Put
from threadline.runtime.effects import Effect, Load
from threadline.runtime.migrate import check_planned
from threadline.runtime.planning import hits, plan_next, tasks_of
from threadline.runtime.progress import Progress, error_value
from threadline.runtime.replay import carried_inputs, fork_of, may_continue_at
from threadline.runtime.settings import RunSettings
from threadline.runtime.step_setup import SPARE_ANSWER_TASK, StepSetup
from threadline.runtime.task import Outcome, Task, TaskResult, start_result
from threadline.runtime.task_ids import local_task_id, task_id
from threadline.runtime.trace import without_trace
from threadline.runtime.writes import (
    Update,
    applied,
    apply_writes,
    finished_updates,
    updates_of,
)
from threadline.store.base import BaseStore
from threadline.types import Command, Interrupt, Send

BREAKPOINT_TASK = "__breakpoint__"
STEP_TASK = "__step__"  # an error of a whole step: its tasks' writes could not be applied


class RunLoop:
    """One run of a graph on one thread (or without a checkpointer)."""

    def __init__(
        self,
        spec: GraphSpec,
        saver: BaseSaver | None,
        store: BaseStore | None,
        settings: RunSettings,
    ) -> None:
        self.spec = spec
        self.saver = saver
        self.store = store
        self.s = settings
        # Checkpoints nobody saves are never seen by id or time: cheap ids, no clock, and no
        # versions (they only tell a saver what to store).
        self._new_id = new_checkpoint_id if saver is not None else run_local_ids(settings.ns)
        self.progress = Progress(settings, saver is not None, now_iso if saver is not None else str)
        self._task_id = task_id if saver is not None else local_task_id
        self.setup = StepSetup(spec, saver, store, settings)  # what each step's tasks are given
        # The stream chunks this run produces; None when nothing is streamed (most runs).
        self.out = Chunks.of_run(spec, settings, saver is not None)

    # ----------------------------------------------------------------- entry
    def run(self, input: Any, put: Put | None = None) -> Generator[Effect, Any, Any]:
        """The run's effects; ``put`` takes the chunks made while tasks run, when any stream."""
        self.setup.put = put
        record = (yield Load(self.s.checkpoint_id)) if self.saver is not None else None
        if self.s.checkpoint_id is not None and record is None:
            raise CheckpointNotFoundError(
                f"thread {self.s.thread_id!r} has no checkpoint {self.s.checkpoint_id!r}"
            )
        # The last step this run may take, as LangGraph counts it (``RemainingSteps`` too): a
        # run given input takes recursion_limit steps, a resumed one up to 2 more
        self.stop = (record.checkpoint.step if record else -2) + 2 + self.s.recursion_limit
        if isinstance(input, Command):
            yield from self._resume(input, record)
        elif self.s.nested and record is not None and not self._starts_anew(record):
            self._resume_nested(record)
            yield from self._emit_values()
        elif input is None:
            yield from self._continue(record)
        else:
            yield from self._begin(input, record)
        return (yield from self._steps())

    def _begin(self, input: Any, record: CheckpointRecord | None) -> Generator[Effect, Any, None]:
        """New input: an ``input`` checkpoint whose START task carries the input."""
        schema = self.spec.schema
        updates = updates_of(schema, "input", self.spec.input_updates(input))
        cp_id = self._new_id()
        if record is None:
            values, step = schema.initial_values(), -1
            versions = dict.fromkeys(values, cp_id) if self.saver is not None else {}
            self.progress.note(dict.fromkeys(values, SET))
        else:
            self.progress.saved = record.checkpoint
            # the record as this graph reads it, with a kept Command update applied
            base, changes = command_input.as_resumed(self.spec, self._upgraded(record))
            values, versions, step = dict(base.values), dict(base.versions), base.step + 1
            self.progress.note(changes)
            self.progress.fork_next = self.s.checkpoint_id is not None
        cp = self.progress.checkpoint(values, versions, (PlannedTask(START),), {}, (), step, cp_id)
        (start,) = tasks_of(self.spec, cp, self.s.ns, self._task_id)
        result = start_result(start, self.setup.env(values, cp_id), updates)
        yield from self.progress.commit(cp, "input", [TaskWrite(start.id, START, "result", result)])

    def _continue(self, record: CheckpointRecord | None) -> Generator[Effect, Any, None]:
        """``invoke(None)``: go on from the latest checkpoint, or replay from an older one.

        Either way the step it starts with does not stop at ``interrupt_before`` again.
        """
        if record is None and self.saver is None:
            asked = (self.s.config.get("configurable") or {}).get("thread_id")
            raise NothingToResumeError(
                f"invoke(None) continues a saved thread{f' ({asked!r})' if asked else ''}, but "
                "this graph has no checkpointer: compile(checkpointer=...) to keep threads, or "
                "pass an input"
            )
        if record is None:
            raise NothingToResumeError(
                f"thread {self.s.thread_id!r} has no checkpoint to continue; pass an input"
            )
        if self.s.checkpoint_id is None or (
            may_continue_at(record) and (yield Load(None)).checkpoint.id == record.checkpoint.id
        ):
            self._adopt(record)
            self._pass_breakpoint()
            yield from self._emit_values()
            return
        self.progress.saved = record.checkpoint
        self.progress.fork_next = True
        record = self._upgraded(record)
        check_planned(self.spec, record)
        fork = fork_of(record, self._new_id(), self.progress.now())
        yield from self.progress.commit(fork, "fork", carried_inputs(record, fork))
        self._pass_breakpoint()
        yield from self._emit_values()

    def _resume(
        self, command: Command[Any], record: CheckpointRecord | None
    ) -> Generator[Effect, Any, None]:
        """A Command: its update and goto join the step the thread resumes with (kept with its
        checkpoint, see ``command_input``); its answers go to the interrupted tasks."""
        command_input.check(command)
        if self.saver is None:
            raise ResumeWithoutCheckpointerError("a Command needs a graph with a checkpointer")
        if record is None:
            raise NothingToResumeError(
                f"thread {self.s.thread_id!r} has no checkpoint, so there is nothing to resume; "
                "check the thread id (nothing was run)"
            )
        self._adopt(record, command)
        pending = self._pending_interrupts()
        if command.resume is None:
            pass  # an update or goto alone: the planned tasks run on the updated state
        elif pending:
            self._record_answers(match_answers(command.resume, pending), pending)
        elif self._next_names():
            # Nothing waits (state was updated, or a static breakpoint stopped the run): the
            # value goes to the first interrupt() the next step calls.
            spare = TaskWrite(SPARE_ANSWER_TASK, SPARE_ANSWER_TASK, "resume", command.resume)
            self.progress.add_write(spare)
        else:
            raise NothingToResumeError(
                f"thread {self.s.thread_id!r} is not waiting at an interrupt and its run "
                "has finished; pass a new input to run again"
            )
        yield from self._emit_values()

    def _starts_anew(self, record: CheckpointRecord) -> bool:
        """A checkpointer=True subgraph takes this call's input unless the parent's task that
        stopped inside it runs again (a resume or retry, from the same parent checkpoint)."""
        if not self.s.persistent:
            return False
        return not record.checkpoint.next or record.metadata.get("parents") != self.s.parents

    def _resume_nested(self, record: CheckpointRecord) -> None:
        """A subgraph re-entered by its parent's task: continue it, with any answers for it."""
        self._adopt(record)
        self._pass_breakpoint()
        pending = self._pending_interrupts()
        answers = {
            i.id: self.s.parent_answers[i.id] for _, i in pending if i.id in self.s.parent_answers
        }
        if answers:
            self._record_answers(answers, pending)

    # ----------------------------------------------------------------- steps
    def _steps(self) -> Generator[Effect, Any, Any]:
        while True:
            cp = self.progress.cp()
            tasks = tasks_of(self.spec, cp, self.s.ns, self._task_id)
            out = self.out
            if out is not None:
                yield from out.checkpoint(cp, self.progress.meta, tasks, self.progress.writes)
            if not tasks:
                yield from self.progress.flush()
                return self._output()
            writes = self.progress.writes  # empty in the usual case: a step that has not run yet
            runnable = [t for t in tasks if (t.id, "result") not in writes] if writes else tasks
            if runnable and runnable[0].node is None:  # START, planned alone, has no node
                raise NothingToResumeError(
                    f"checkpoint {cp.id} of thread {self.s.thread_id!r} plans the input step, "
                    "but the input it was given is not stored; start from a later checkpoint"
                )
            if runnable:
                if cp.step + 1 > self.stop:  # the step these tasks would make is past the limit
                    yield from self.progress.flush()
                    raise GraphRecursionError(
                        f"Recursion limit of {self.s.recursion_limit} reached without hitting a "
                        f"stop condition (thread {self.s.thread_id!r}, next: {self._next_names()})"
                        ". Raise config['recursion_limit'] or check the loop's exit condition."
                    )
                before = self.s.interrupt_before
                if before and not self.progress.writes and hits(before, runnable):
                    return (yield from self._breakpoint(runnable))
                control = self.s.control
                if control is not None and control.drain_requested and not self.s.nested:
                    yield from self.progress.flush()  # the step before is saved, even on "exit"
                    raise GraphDrained(control.drain_reason or "shutdown")
                if out is not None:
                    yield from out.step_starts(cp.step + 1, cp.values, tasks, self.progress.writes)
                outcomes = yield self.setup.execute(runnable, cp, self.progress.writes, self.stop)
                if self._keep(outcomes):
                    return (yield from self._stop(outcomes))
            yield from self._advance(tasks)
            if self.s.interrupt_after and hits(self.s.interrupt_after, runnable):
                if not self.s.nested:  # the thread shows as paused, not as a run cut short
                    self.progress.add_write(
                        TaskWrite(BREAKPOINT_TASK, BREAKPOINT_TASK, "breakpoint", ())
                    )
                yield from self.progress.flush()
                if out is not None:  # the next step, which would stream it, does not run
                    after = self.progress.cp()
                    planned = tasks_of(self.spec, after, self.s.ns, self._task_id)
                    yield from out.checkpoint(
                        after, self.progress.meta, planned, self.progress.writes
                    )
                    yield from out.breakpoint()
                return self._output()

    def _keep(self, outcomes: list[Outcome]) -> bool:
        """Keep every task's outcome as a write; True when the step cannot complete."""
        held = self.setup.held()
        if held:
            self.progress.add_writes(held)
        return not self.progress.keep(outcomes)

    def cancelled(self, finished: list[Outcome]) -> Generator[Effect, Any, None]:
        """The run was cancelled between effects or mid-step: keep what the step's finished
        tasks wrote and save what is not saved yet, so a later call goes on from here."""
        self._keep(finished)
        yield from self.progress.flush()

    def _stop(self, outcomes: list[Outcome]) -> Generator[Effect, Any, Any]:
        """A task failed, was interrupted or routed to the parent: save the step's writes, stop."""
        yield from self.progress.flush()
        parent = next((o.parent_command for o in outcomes if o.parent_command is not None), None)
        if parent is not None:
            raise ParentCommand(parent)
        failed = next((o.error for o in outcomes if o.error is not None), None)
        if failed is not None:
            raise failed
        interrupts = tuple(i for _, i in self._pending_interrupts())
        if self.s.nested:
            raise GraphInterrupt(interrupts)
        tasks = tasks_of(self.spec, self.progress.cp(), self.s.ns, self._task_id)
        done = finished_updates(tasks, self.progress.writes)  # shown on top of the step's values
        if self.out is not None:
            yield from self.out.interrupted(self.progress.cp().values, done)
        return self._output(interrupts, done)

    def _advance(self, tasks: list[Task]) -> Generator[Effect, Any, None]:
        """Apply the step's results in task order and save the checkpoint that follows."""
        cp, writes = self.progress.cp(), self.progress.writes
        updates: list[tuple[str, Update]] = []
        routes: list[tuple[str, tuple[str | Send, ...]]] = []
        updated_by: dict[str, None] = {}  # the nodes that wrote, once each, in task order
        for t in tasks:  # one loop: three comprehensions' frames cost more here
            result: TaskResult = writes[(t.id, "result")].value
            updates.append((t.name, result.updates))
            routes.append((t.name, result.routes))
            updated_by[t.name] = None
        updated_by.pop(START, None)
        new_id = self._new_id()
        try:
            versions = cp.versions if self.saver is not None else None
            values, versions, changes = apply_writes(
                self.spec.schema, cp.values, versions, updates, new_id
            )
            next_, barriers = plan_next(self.spec, cp.barriers, routes)
        except Exception as exc:
            error = exc
            if not isinstance(exc, ThreadlineError):
                step = cp.step + 1
                error = InvalidUpdateError(f"a reducer failed while applying step {step}: {exc}")
            # Saved with the step's results, so the thread shows the step as not done (and why)
            self.progress.add_write(TaskWrite(STEP_TASK, STEP_TASK, "error", error_value(error)))
            yield from self.progress.flush()
            if error is exc:
                raise
            raise error from exc
        new = self.progress.checkpoint(
            values, versions, next_, barriers, tuple(updated_by), cp.step + 1, new_id
        )
        before = self.progress.snapshot()
        self.progress.note(changes)
        try:
            yield from self.progress.commit(new, "loop", [])
        except SerializationError as exc:  # a value the step made cannot be stored
            self.progress.restore(before)
            yield from self._unstorable(tasks, exc)
            raise
        if self.out is not None:
            yield from self.out.step_applied(new.values, [u for _, u in updates])

    def _unstorable(
        self, tasks: list[Task], exc: SerializationError
    ) -> Generator[Effect, Any, None]:
        """The checkpoint after the step could not be encoded (the driver threw ``exc`` back
        here): the step stays undone, as if the task whose result cannot be stored had raised
        ``exc`` (the step itself, if no one result is to blame), so the thread shows ``error``
        and why, as after a node that raised."""
        codec = getattr(self.saver, "serde", None) or serde.DEFAULT
        writes = self.progress.writes
        culprits = [t for t in tasks if not _encodes(codec, writes[(t.id, "result")].value)]
        errors = [TaskWrite(t.id, t.name, "error", error_value(exc)) for t in culprits]
        self.progress.drop_results({t.id for t in culprits})
        self.progress.add_writes(
            errors or [TaskWrite(STEP_TASK, STEP_TASK, "error", error_value(exc))]
        )
        yield from self.progress.flush()

    def _breakpoint(self, runnable: list[Task]) -> Generator[Effect, Any, Any]:
        names = tuple(dict.fromkeys(t.name for t in runnable))
        self.progress.add_writes([TaskWrite(BREAKPOINT_TASK, BREAKPOINT_TASK, "breakpoint", names)])
        yield from self.progress.flush()
        if self.out is not None:
            yield from self.out.breakpoint()
        if self.s.nested:
            raise GraphInterrupt(())
        return self._output()

    def _record_answers(
        self, answers: dict[str, Any], pending: list[tuple[TaskWrite, Interrupt]]
    ) -> None:
        """Keep the answers with the tasks they are for.

        They are saved with the step's other writes if it stops again, and are not needed once
        the step completes; saving nothing first means a run that loses the race for the thread
        to another writer leaves nothing behind.
        """
        self.progress.add_writes(resume_writes(answers, pending, self.progress.writes))
        if self.s.trace is not None:
            self.s.trace.answered(self.progress.cp(), answers, pending)

    def _pass_breakpoint(self) -> None:
        """Mark the current step as started, so its ``interrupt_before`` does not stop it.

        Not saved on its own: it only lives until the step completes.
        """
        marker = TaskWrite(BREAKPOINT_TASK, BREAKPOINT_TASK, "breakpoint", ())
        self.progress.writes.setdefault((BREAKPOINT_TASK, "breakpoint"), marker)

    def _adopt(self, record: CheckpointRecord, command: Command[Any] | None = None) -> None:
        """Go on from ``record``; a Command's update and goto are kept as a pending write."""
        saved = record.checkpoint
        record = self._upgraded(record)
        check_planned(self.spec, record)
        p = self.progress
        p.adopt(saved, dict(record.metadata), without_trace(record.pending_writes))
        if command is not None and (kept := command_input.write(self.spec, command, p.writes)):
            p.add_write(kept)
        p.current, changes = command_input.applied(self.spec, record.checkpoint, p.writes)
        p.note(changes)

    def _upgraded(self, record: CheckpointRecord) -> CheckpointRecord:
        """``record`` as this graph reads it; values an upcaster rewrote count as changed, so
        the next checkpoint stores them anew."""
        upgraded = record if self.s.upgrade is None else self.s.upgrade(record)
        if upgraded is not record:
            self.progress.note(dict.fromkeys(upgraded.checkpoint.values, SET))
        return upgraded

    # ----------------------------------------------------------------- views
    def _pending_interrupts(self) -> list[tuple[TaskWrite, Interrupt]]:
        return pending_interrupts(self.progress.writes.values())

    def _next_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.progress.cp().next)

    def _output(self, interrupts: tuple[Interrupt, ...] = (), done: Any = ()) -> Any:
        """What the run returns; ``done``: what a stopped step's finished tasks wrote. A state
        that is one value is returned as it is (with no room for interrupts, as in LangGraph)."""
        values = self.spec.output_values(applied(self.spec.schema, self.progress.cp().values, done))
        if interrupts and isinstance(values, dict):
            values[INTERRUPT_KEY] = list(interrupts)
        return values

    def _emit_values(self) -> Generator[Effect, Any, None]:
        if self.out is not None:
            yield from self.out.input_values(self.progress.cp().values)


def _encodes(codec: serde.Serializer, value: Any) -> bool:
    try:
        codec.dumps(value)
    except SerializationError:
        return False
    return True
