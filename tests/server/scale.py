"""A scale-out cluster for tests and ``make soak``: one API server, worker processes, PostgreSQL.

The API server runs in this process (uvicorn in a thread, ``queue = "procrastinate"``: it
runs nothing itself); each worker is a real subprocess calling ``run_worker``. Everything
lives in a fresh PostgreSQL schema, dropped at the end. The ``audited`` graph records each
of its steps (thread, label, pid, start, end) in the schema's ``audit`` table; ``check``
reads it back and says what is wrong, if anything.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from harness import GRAPHS, HERE, start_server
from served_graphs import AUDIT_DB, AUDIT_TABLE

from threadline.server.settings import ServerSettings

ROOT = HERE.parent.parent
STEPS = ("work1", "work2", "work3")
WORKER_SCRIPT = (
    "import json, logging, sys\n"
    "from pathlib import Path\n"
    "from threadline.server.settings import ServerSettings\n"
    "from threadline.server.worker import run_worker\n"
    "logging.basicConfig(level=logging.WARNING)\n"
    "options = json.loads(sys.argv[1])\n"
    "run_worker(ServerSettings(**{**options, 'base_dir': Path(options['base_dir'])}))\n"
)


@dataclass
class Cluster:
    url: str
    settings: ServerSettings
    logs: Path
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    killed: list[tuple[int, datetime]] = field(default_factory=list)

    @property
    def table(self) -> str:
        return f'"{self.settings.schema}".audit'

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.settings.db, autocommit=True) as conn:
            return conn.execute(query, params).fetchall()

    def start_worker(self) -> subprocess.Popen[bytes]:
        options = {**asdict(self.settings), "base_dir": str(self.settings.base_dir)}
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            AUDIT_DB: self.settings.db,
            AUDIT_TABLE: self.table,
        }
        log = open(self.logs / f"worker-{len(self.workers)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER_SCRIPT, json.dumps(options)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.workers.append(proc)
        return proc

    def wait_for_workers(self, count: int, timeout: float = 30) -> None:
        """Until ``count`` workers beat their heart in Procrastinate's table."""
        deadline = time.monotonic() + timeout
        query = f'SELECT count(*) FROM "{self.settings.schema}".procrastinate_workers'
        while self._count(query) < count:
            dead = [p.pid for p in self.workers if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"workers did not start (exited: {dead}); see {self.logs}")
            time.sleep(0.1)

    def _count(self, query: str) -> int:
        try:
            return int(self.sql(query)[0][0])
        except psycopg.errors.UndefinedTable:
            return 0

    def kill_one_mid_step(self, timeout: float = 30, fresh: float = 0.1) -> int:
        """SIGKILL a live worker while one of its steps is surely running (it started less
        than ``fresh`` seconds ago, well within its delay); its pid."""
        live = {p.pid: p for p in self.workers if p.poll() is None and p.pid not in self.dead}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = self.sql(
                f"SELECT pid FROM {self.table} WHERE ended IS NULL "
                "AND started > clock_timestamp() - make_interval(secs => %s)",
                fresh,
            )
            for (pid,) in busy:
                if pid in live:
                    os.kill(pid, signal.SIGKILL)
                    live[pid].wait()
                    self.killed.append((pid, self.sql("SELECT clock_timestamp()")[0][0]))
                    return int(pid)
            time.sleep(0.02)
        raise RuntimeError("no worker was mid-step to kill")

    @property
    def dead(self) -> set[int]:
        return {pid for pid, _ in self.killed}

    def stop_workers(self) -> list[int | None]:
        for proc in self.workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = []
        for proc in self.workers:
            try:
                codes.append(proc.wait(timeout=20))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(proc.wait())
        return codes


@contextmanager
def cluster(db: str, logs: Path, *, workers: int = 3, lease: float = 2.0) -> Iterator[Cluster]:
    """An API server and ``workers`` worker processes over a fresh schema of ``db``."""
    schema = f"tl_scale_{uuid.uuid4().hex[:12]}"
    settings = ServerSettings(
        graphs=GRAPHS,  # "audited" among them
        base_dir=HERE,
        db=db,
        schema=schema,
        queue="procrastinate",
        lease_seconds=lease,
        workers=4,
    )
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(
            f'CREATE TABLE "{schema}".audit (id bigserial PRIMARY KEY, thread_id text, '
            "label text, pid int, started timestamptz, ended timestamptz)"
        )
    running, thread = start_server(settings)
    found = Cluster(running.url, running.settings, logs)
    try:
        for _ in range(workers):
            found.start_worker()
        found.wait_for_workers(workers)
        yield found
    finally:
        found.stop_workers()
        running.stop()
        thread.join(timeout=20)
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@dataclass
class Audit:
    """What the audit table says: steps run, steps run again, problems."""

    steps: int = 0
    cut: int = 0  # steps a kill stopped before they ended (each ran again elsewhere)
    rerun_after_end: int = 0  # steps that ended in a killed worker before their checkpoint
    takeover_seconds: list[float] = field(default_factory=list)  # kill -> the cut step again
    problems: list[str] = field(default_factory=list)


def check(c: Cluster, expected: dict[str, tuple[str, ...]]) -> Audit:
    """Each thread's steps ran exactly once, but for a step a kill cut (it may run again once);
    no two steps of a thread overlapped in time (so never in two workers at once); every step
    ran in a worker process (the API server runs nothing)."""
    rows = c.sql(f"SELECT thread_id, label, pid, started, ended FROM {c.table}")
    killed_at = dict(c.killed)
    by_thread: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        by_thread[row[0]].append(row)
    audit = Audit(steps=len(rows))
    workers = {p.pid for p in c.workers}
    audit.problems += [
        f"a step ran outside the workers, in pid {r[2]}" for r in rows if r[2] not in workers
    ]
    for thread_id, labels in expected.items():
        mine = by_thread.pop(thread_id, [])
        _check_thread(thread_id, labels, mine, killed_at, audit)
    audit.problems += [f"steps of unknown thread {t}" for t in by_thread]
    return audit


def _check_thread(
    thread_id: str,
    labels: tuple[str, ...],
    rows: list[tuple[Any, ...]],
    killed_at: dict[int, datetime],
    audit: Audit,
) -> None:
    ended = defaultdict(list)
    for _, label, pid, _, end in rows:
        if end is None:
            if pid not in killed_at:
                audit.problems.append(f"{thread_id} {label}: unfinished in live pid {pid}")
                continue
            audit.cut += 1
            again = [r[3] for r in rows if r[1] == label and r[3] > killed_at[pid]]
            if again:
                audit.takeover_seconds.append((min(again) - killed_at[pid]).total_seconds())
        else:
            ended[label].append(pid)
    for label in labels:
        pids = ended.pop(label, [])
        if len(pids) == 2 and any(p in killed_at for p in pids):
            audit.rerun_after_end += 1
        elif len(pids) != 1:
            audit.problems.append(f"{thread_id} {label}: ended {len(pids)} times ({pids})")
    audit.problems += [f"{thread_id} {label}: not expected" for label in ended]
    never = datetime.max.replace(tzinfo=UTC)  # a step still going in a live worker
    spans = sorted(
        (start, end or killed_at.get(pid, never), pid, label) for _, label, pid, start, end in rows
    )
    for before, after in itertools.pairwise(spans):
        if after[0] < before[1]:
            audit.problems.append(f"{thread_id}: {before[3]} and {after[3]} overlapped")


@dataclass
class Outcome:
    """A workload's runs, what each thread should have recorded, and what went wrong."""

    runs: list[tuple[str, str]] = field(default_factory=list)  # (thread_id, run_id)
    expected: dict[str, tuple[str, ...]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    stream_repeats: int = 0


async def workload(
    c: Cluster, threads: int, *, delay: float, kills: int, replace: bool = False
) -> Outcome:
    """Start a run on each of ``threads`` threads (every third one asks a person and is
    answered over HTTP), SIGKILL a worker mid-step ``kills`` times (starting a new one each
    time when ``replace``), wait for every run, and check what each run and thread left."""
    from langgraph_sdk import get_client

    client = get_client(url=c.url)
    out = Outcome()
    first: dict[str, str] = {}
    for i in range(threads):
        thread_id = (await client.threads.create())["thread_id"]
        ask = i % 3 == 0
        # n = 0 in the input: an attempt that started over from the input instead of going on
        # from the checkpoint would run work1 again, and the audit would see it
        body = {"n": 0, "delay": delay, "ask": ask}
        run = await client.runs.create(thread_id, "audited", input=body, stream_mode="updates")
        first[thread_id] = run["run_id"]
        out.expected[thread_id] = (*STEPS, "ask") if ask else STEPS
    for _ in range(kills):
        c.kill_one_mid_step()
        if replace:
            c.start_worker()
    for thread_id, run_id in first.items():
        await _join(client, thread_id, run_id)
        out.runs.append((thread_id, run_id))
        if "ask" in out.expected[thread_id]:
            answer = await client.runs.create(thread_id, "audited", command={"resume": "yes"})
            out.runs.append((thread_id, answer["run_id"]))
    for thread_id, run_id in out.runs:
        await _join(client, thread_id, run_id)
        await _check_run(client, thread_id, run_id, out)
    for thread_id, labels in out.expected.items():
        await _check_thread_end(client, thread_id, labels, out)
    return out


async def _join(client: Any, thread_id: str, run_id: str, timeout: float = 90) -> None:
    """Wait for a run; a run that never ends fails the check here rather than hanging it."""
    try:
        await asyncio.wait_for(client.runs.join(thread_id, run_id), timeout)
    except TimeoutError:
        run = await client.runs.get(thread_id, run_id)
        raise AssertionError(f"run {run_id} did not end in {timeout} s: {run}") from None


async def _check_run(client: Any, thread_id: str, run_id: str, out: Outcome) -> None:
    run = await client.runs.get(thread_id, run_id)
    if run["status"] != "success":
        out.problems.append(f"run {run_id} ended {run['status']}")
    if run["kwargs"].get("command"):
        return
    seen: list[int] = []
    # stream_mode is given: without it the SDK sends "stream_mode=" and the server (today)
    # reads that as a mode named "", which drops every event (reported to the interop work)
    async for part in client.runs.join_stream(thread_id, run_id, stream_mode="updates"):
        if part.event == "updates" and "work" in (part.data or {}):
            seen.append(part.data["work"]["n"])
    if sorted(set(seen)) != [1, 2, 3]:
        out.problems.append(f"run {run_id}: its stream's steps were {seen}")
    out.stream_repeats += len(seen) - len(set(seen))


async def _check_thread_end(
    client: Any, thread_id: str, labels: tuple[str, ...], out: Outcome
) -> None:
    thread = await client.threads.get(thread_id)
    values = thread["values"]
    want = {"n": 3, **({"answer": "yes"} if "ask" in labels else {})}
    if thread["status"] != "idle" or any(values.get(k) != v for k, v in want.items()):
        out.problems.append(f"thread {thread_id} ended {thread['status']} with {values}")
    runs = await client.runs.list(thread_id)
    if len(runs) != (2 if "ask" in labels else 1):
        out.problems.append(f"thread {thread_id} has {len(runs)} runs")
