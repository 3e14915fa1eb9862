"""The kill harness: runs workloads in child processes, SIGKILLs them, continues, and checks.

A *trial* is one thread of one workload (``app.WORKLOADS``) on one saver with one durability
mode. It runs in *rounds*, each a fresh process (forked from a server that has only imported
the code): the first starts the thread, the next ones continue it, until it is finished. A round
may carry a kill plan, aimed at a named hook (``app.HOOKS``) or at a random time. Before each
round the parent reads from the store which node executions and ``@task`` calls have their
success recorded. After the trial it checks:

- the final state equals the one of an uninterrupted run (the *reference*, one per workload,
  saver and durability, which also counts the hook hits that later kills aim at);
- the history is one unbroken chain: one root, every parent present, steps increasing, no
  fork, the newest checkpoint the only leaf;
- exactly once after success: no node execution or task call whose success was recorded
  before a round ran again in that round (nor twice in one process), and every recorded one
  ran. A call that runs again because the kill came before its result was saved is counted as
  an at-least-once repeat, which is allowed.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.crash import app
from threadline.checkpoint import BaseSaver, from_url

BACKENDS = ("sqlite", "files", "postgres", "redis")
DURABILITIES = ("sync", "async", "exit")
KILL_POINTS = (*app.HOOKS, "random")
TIMED = ("postgres", "redis")  # savers whose ``put-inside`` kill is a timer (see app.py)
MAX_ROUNDS = 16
ROUND_TIMEOUT = 60.0  # seconds a round may take before it counts as hung
LOST = 255  # the exit code ``multiprocessing`` reports when it lost a child's status

_CTX = multiprocessing.get_context("forkserver")
_CTX.set_forkserver_preload(["tests.crash.app"])


@dataclass(frozen=True)
class Trial:
    workload: str
    durability: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.workload}-{self.durability}-{self.seed}"


@dataclass
class Outcome:
    """What happened in one trial, and what broke (``failures`` is empty when nothing did)."""

    backend: str
    trial: Trial
    kills: list[str] = field(default_factory=list)  # the kill point of each kill that landed
    rounds: int = 0
    repeats: int = 0  # at-least-once: side effects run again, their result not yet saved
    failures: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return (
            f"{self.backend} {self.trial.workload} durability={self.trial.durability} "
            f"seed={self.trial.seed} kills={self.kills}"
        )


@dataclass
class Report:
    """The figures of a batch of trials."""

    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[str]:
        return [f"{o.describe()}: {f}" for o in self.outcomes for f in o.failures]

    @property
    def kills(self) -> int:
        return sum(len(o.kills) for o in self.outcomes)

    def kills_by(self, what: str) -> Counter[str]:
        """Kills counted by ``"point"``, ``"backend"`` or ``"workload"``."""
        counts: Counter[str] = Counter()
        for o in self.outcomes:
            for point in o.kills:
                key = {"point": point, "backend": o.backend, "workload": o.trial.workload}[what]
                counts[key] += 1
        return counts

    def merge(self, other: Report) -> None:
        self.outcomes += other.outcomes
        self.seconds += other.seconds

    def summary(self) -> str:
        return (
            f"{len(self.outcomes)} trials, {self.kills} kills "
            f"({dict(sorted(self.kills_by('point').items()))}), "
            f"{sum(o.rounds for o in self.outcomes)} processes, "
            f"{sum(o.repeats for o in self.outcomes)} at-least-once repeats, "
            f"{len(self.failures)} failures, {self.seconds:.1f} s"
        )


@dataclass
class Reference:
    """An uninterrupted run: its final state, hook hits, and how long it and its saves take."""

    final: Any
    hits: Counter[str]
    round_seconds: float
    save_seconds: float


def trials(count: int, seed: int, workloads: Iterable[str] | None = None) -> list[Trial]:
    """``count`` trials cycling through the workloads, with durability drawn by seed."""
    names = list(workloads or app.WORKLOADS)
    rng = random.Random(seed)
    return [
        Trial(names[i % len(names)], rng.choices(DURABILITIES, (6, 3, 1))[0], seed * 100_000 + i)
        for i in range(count)
    ]


@contextmanager
def place(backend: str, url: str | None, workdir: Path) -> Iterator[Harness]:
    """A harness for ``backend`` (``url``: the server's, for PostgreSQL and Redis), whose
    schema or key prefix is dropped afterwards."""
    name = f"kill_{uuid.uuid4().hex[:12]}"
    if backend in ("sqlite", "files"):
        yield Harness(backend, None, {}, workdir)
        return
    assert url is not None
    options = {"schema": name} if backend == "postgres" else {"prefix": name}
    try:
        yield Harness(backend, url, options, workdir)
    finally:
        _drop(backend, url, name)


def _drop(backend: str, url: str, name: str) -> None:
    if backend == "postgres":
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        return
    import redis

    with redis.Redis.from_url(url) as client:
        keys = list(client.scan_iter(match=f"{name}:*", count=1000))
        for at in range(0, len(keys), 1000):
            client.unlink(*keys[at : at + 1000])


class Harness:
    """Runs trials on one backend; each trial has its own thread id (and file, for SQLite
    and files), and removes its work folder when it passed."""

    def __init__(
        self, backend: str, url: str | None, options: dict[str, Any], workdir: Path
    ) -> None:
        self.backend = backend
        self.url = url
        self.options = options
        self.workdir = workdir
        self.fault: str | None = None  # a fault the children inject (app._break), in trials
        self._references: dict[tuple[str, str], Reference] = {}
        self._lock = threading.Lock()

    def run(self, batch: Iterable[Trial], workers: int = 4) -> Report:
        started = time.perf_counter()
        batch = list(batch)
        for config in dict.fromkeys((t.workload, t.durability) for t in batch):
            self.reference(*config)
        with ThreadPoolExecutor(workers) as pool:
            outcomes = list(pool.map(self.trial, batch))
        return Report(outcomes, time.perf_counter() - started)

    # -- one trial ------------------------------------------------------------------------------

    def reference(self, workload: str, durability: str) -> Reference:
        with self._lock:
            if (workload, durability) not in self._references:
                self._references[workload, durability] = self._reference(workload, durability)
            return self._references[workload, durability]

    def _reference(self, workload: str, durability: str) -> Reference:
        trial = Trial(workload, durability, -1)
        rounds = _Rounds(self, trial, f"ref-{trial.name}-{uuid.uuid4().hex[:6]}", None)
        hits: Counter[str] = Counter()
        saves: list[float] = []
        longest = 0.0
        while not rounds.finished:
            started = time.perf_counter()
            code = rounds.run(None, None)
            longest = max(longest, time.perf_counter() - started)
            if code != 0 or rounds.count > MAX_ROUNDS:
                raise RuntimeError(f"the reference run of {trial.name} failed: {rounds.error()}")
            report = json.loads((rounds.dir / f"round-{rounds.count - 1}.json").read_text())
            hits.update(report["hits"])
            saves += report["save_seconds"]
        final = rounds.final()
        rounds.close(keep=False)
        return Reference(final, hits, longest, max(saves, default=0.001))

    def trial(self, trial: Trial, kills: int | None = None) -> Outcome:
        """Run ``trial`` with ``kills`` kills (by default 1 to 4, drawn from its seed)."""
        ref = self.reference(trial.workload, trial.durability)
        rng = random.Random(trial.seed)
        wanted = rng.randint(1, 4) if kills is None else kills
        outcome = Outcome(self.backend, trial)
        rounds = _Rounds(self, trial, f"t{trial.seed}-{uuid.uuid4().hex[:6]}", self.fault)
        try:
            self._rounds(rounds, ref, rng, wanted, outcome)
            if not outcome.failures:
                outcome.failures += rounds.check_end(ref)
        except Exception as exc:  # the harness itself must not hide a trial's problem
            outcome.failures.append(f"harness error: {type(exc).__name__}: {exc}")
        outcome.rounds = rounds.count
        outcome.repeats = rounds.repeats
        rounds.close(keep=bool(outcome.failures))
        return outcome

    def _rounds(
        self, rounds: _Rounds, ref: Reference, rng: random.Random, wanted: int, outcome: Outcome
    ) -> None:
        while not rounds.finished:
            if rounds.count >= MAX_ROUNDS:
                outcome.failures.append(f"not finished after {MAX_ROUNDS} rounds")
                return
            point, plan, delay = (
                self._aim(rng, ref) if len(outcome.kills) < wanted else (None, None, None)
            )
            recorded = rounds.recorded()
            code = rounds.run(plan, delay)
            outcome.failures += rounds.check_round(recorded)
            if code == -9 and point is not None:
                outcome.kills.append(point)
            elif code == -9:
                outcome.failures.append(f"round {rounds.count - 1} was killed, unplanned")
            elif code != 0:
                outcome.failures.append(
                    f"round {rounds.count - 1} exited with {code}: {rounds.error()}"
                )
            if outcome.failures:
                return

    def _aim(
        self, rng: random.Random, ref: Reference
    ) -> tuple[str, dict[str, Any] | None, float | None]:
        """A kill point reached by this workload, and the plan (or delay) that aims at it."""
        points = [p for p in KILL_POINTS if p == "random" or ref.hits[p] > 0]
        point = rng.choice(points)
        if point == "random":
            return point, None, rng.uniform(0.0, ref.round_seconds)
        plan: dict[str, Any] = {"hook": point, "n": rng.randint(1, ref.hits[point])}
        if point == "put-inside" and self.backend in TIMED:
            plan["delay"] = rng.uniform(0.0, ref.save_seconds)
        return point, plan, None

    def store(self, name: str) -> tuple[str, dict[str, Any]]:
        """The URL and options of a trial's store."""
        if self.backend == "sqlite":
            return f"sqlite:///{self.workdir / name}.db", {}
        if self.backend == "files":
            return f"file://{self.workdir / name}.threads", {}
        assert self.url is not None
        return self.url, self.options


class _Rounds:
    """The rounds of one trial: the processes, the store they share, the log they append to."""

    def __init__(self, harness: Harness, trial: Trial, name: str, fault: str | None) -> None:
        self.harness = harness
        self.fault = fault
        self.trial = trial
        self.dir = harness.workdir / name
        self.dir.mkdir(parents=True)
        self.url, self.options = harness.store(name)
        self.thread_id = f"kill-{name}"
        self.count = 0
        self.repeats = 0
        self._ran: Counter[str] = Counter()  # executions of each node / task key so far
        self._saver: BaseSaver | None = None

    @property
    def finished(self) -> bool:
        return (self.dir / "final.json").exists()

    def final(self) -> Any:
        return json.loads((self.dir / "final.json").read_text())

    def run(self, plan: dict[str, Any] | None, delay: float | None) -> int | None:
        """One round in a fresh process; its exit code (-9 when killed)."""
        spec = {
            "round": self.count,
            "plan": plan,
            "backend": self.harness.backend,
            "url": self.url,
            "options": self.options,
            "workload": self.trial.workload,
            "durability": self.trial.durability,
            "thread_id": self.thread_id,
            "workdir": str(self.dir),
            "log": str(self.dir / "effects.log"),
            "fault": self.fault,
        }
        self.count += 1
        process = _CTX.Process(target=app.run_round, args=(spec,), daemon=True)
        process.start()
        if delay is not None:
            process.join(delay)
            if process.exitcode is None:
                process.kill()
        process.join(ROUND_TIMEOUT)
        if process.exitcode is None:
            process.kill()
            process.join()
            return None
        if process.exitcode == LOST:
            return self._fate(aimed=plan is not None or delay is not None)
        return process.exitcode

    def _fate(self, aimed: bool) -> int:
        """The exit code of a round whose status the fork server lost (it reports 255 when the
        status pipe of a child gives EOF, which happens now and then to children that SIGKILL
        themselves; the process is gone by then): read from the files the round left."""
        round_ = self.count - 1
        if (self.dir / f"round-{round_}.json").exists():
            return 0
        if (self.dir / f"error-{round_}.txt").exists():
            return 3
        return -9 if aimed else LOST

    def error(self) -> str:
        path = self.dir / f"error-{self.count - 1}.txt"
        if path.exists():
            return path.read_text().strip().splitlines()[-1]
        return "no error file (hung, or died without one)"

    # -- what the store has recorded ------------------------------------------------------------

    def saver(self) -> BaseSaver:
        if self._saver is None:
            self._saver = from_url(self.url, **self.options)
        return self._saver

    def history(self) -> list[Any]:
        return list(self.saver().list(self.thread_id))

    def recorded(self) -> set[str]:
        """Keys of the node executions and task calls whose success the store has."""
        records = self.history()
        by_id = {r.checkpoint.id: r for r in records}
        keys: set[str] = set()
        for r in records:
            for w in r.pending_writes:
                if w.kind == "task":
                    keys.add(w.task_id)
                elif w.kind == "result":
                    keys.add(app.node_key(w.task_name, r.checkpoint.values))
            parent = by_id.get(r.checkpoint.parent_id)
            if parent is not None:  # the step from the parent finished: its nodes succeeded
                cp = parent.checkpoint
                keys.update(app.node_key(t.name, cp.values) for t in cp.next)
        return keys

    def _effects(self) -> list[tuple[int, str, str, str]]:
        path = self.dir / "effects.log"
        if not path.exists():
            return []
        lines = path.read_text().splitlines()
        return [(int(r), kind, key, name) for r, kind, key, name in (ln.split() for ln in lines)]

    # -- checks ---------------------------------------------------------------------------------

    def check_round(self, recorded: set[str]) -> list[str]:
        """No success recorded before the round ran again in it, nor anything twice in it."""
        round_ = self.count - 1
        mine = [(kind, key, name) for r, kind, key, name in self._effects() if r == round_]
        problems = []
        seen: Counter[str] = Counter(key for _, key, _ in mine)
        for kind, key, name in mine:
            if key in recorded:
                problems.append(
                    f"round {round_}: {kind} {name} ({key}) ran again after its success was saved"
                )
            elif self._ran[key]:
                self.repeats += 1  # its earlier run was cut off before its result was saved
            self._ran[key] += 1
        problems += [
            f"round {round_}: {key} ran {n} times in one process"
            for key, n in seen.items()
            if n > 1
        ]
        return problems

    def check_end(self, ref: Reference) -> list[str]:
        problems = []
        final = self.final()
        if final != ref.final:
            problems.append(
                f"final state {final!r} differs from an uninterrupted run's {ref.final!r}"
            )
        records = self.history()
        problems += chain_problems(records, exact_steps=self.trial.durability != "exit")
        ran = {key for _, _, key, _ in self._effects()}
        never = sorted(k for k in self.recorded() - ran if not k.startswith("__"))
        if never:
            problems.append(f"recorded as done but never ran: {never}")
        return problems

    def close(self, keep: bool) -> None:
        if self._saver is not None:
            if not keep and self.harness.backend in TIMED:
                self._saver.delete_thread(self.thread_id)
            self._saver.close()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)
            for suffix in (".db", ".db-wal", ".db-shm", ".threads"):
                path = self.dir.with_name(self.dir.name + suffix)
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)


def chain_problems(records: list[Any], *, exact_steps: bool) -> list[str]:
    """What breaks the chain of a thread's checkpoints (``records`` newest first)."""
    if not records:
        return ["the thread has no checkpoints"]
    by_id = {r.checkpoint.id: r.checkpoint for r in records}
    problems = []
    roots = [cp for cp in by_id.values() if cp.parent_id is None]
    if len(roots) != 1:
        problems.append(f"{len(roots)} roots: {[cp.id for cp in roots]}")
    children: Counter[str] = Counter()
    for cp in by_id.values():
        if cp.parent_id is None:
            continue
        parent = by_id.get(cp.parent_id)
        if parent is None:
            problems.append(f"checkpoint {cp.id} (step {cp.step}): parent {cp.parent_id} missing")
            continue
        children[parent.id] += 1
        if cp.step <= parent.step or (exact_steps and cp.step != parent.step + 1):
            problems.append(f"checkpoint {cp.id}: step {cp.step} after parent's {parent.step}")
    problems += [f"checkpoint {i} has {n} children (a fork)" for i, n in children.items() if n > 1]
    head = records[0].checkpoint
    leaves = [i for i in by_id if not children[i]]
    if leaves != [head.id]:
        problems.append(f"leaves {leaves}, but the newest checkpoint is {head.id}")
    if head.next:
        problems.append(f"the newest checkpoint still plans {[t.name for t in head.next]}")
    return problems
