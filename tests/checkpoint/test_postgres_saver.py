"""What only the PostgreSQL saver promises: one round trip and one commit per put, native async
that scales with the pool, compare-and-set across processes, schema setup and versioning, clear
errors for bad data and dead servers.

Needs PostgreSQL at ``THREADLINE_TEST_POSTGRES_URL`` (default
``postgresql://root@127.0.0.1:5432/test``; see ``tests/services.py``): skipped when unreachable,
failed under ``CI=true``. Every saver made here (and by the conformance suite, through
``postgres_saver``) gets its own schema, named after this test session
(``threadline_test_<pid>_<random>_<n>``), dropped when the saver is closed; parallel runs never
share one.

Round trips are counted on the wire: ``WireCounter`` is a TCP proxy between the saver and the
server that counts *turns* (each time the client speaks again after the server answered: one
round trip) and parses the client's protocol messages to record the SQL it sends, so a test can
also check that a put is one transaction: one statement in autocommit (or, with retention, one
``BEGIN`` and one ``COMMIT`` around the put and the prune).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import json
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from builders import item, make_cp, rec, step, w
from psycopg import sql
from services import postgres_url, require_postgres

from threadline import serde
from threadline.checkpoint.base import (
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    Retention,
)
from threadline.checkpoint.bodies import body_versions
from threadline.checkpoint.changes import SET, Append, ChangedRecord
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.layout import BlobRow, Compaction, referenced_blobs
from threadline.checkpoint.postgres import SCHEMA_VERSION, PostgresSaver, batcher, mask_url
from threadline.checkpoint.postgres import connections as connections_module
from threadline.checkpoint.postgres import saver as saver_module
from threadline.checkpoint.postgres.backend import PostgresBackend
from threadline.errors import SaverUnavailableError, SerializationError

SESSION = f"threadline_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
_schemas = itertools.count()
_used = False  # whether this process created any schema under SESSION


def drop_schemas(name: str, *, prefix: bool = False) -> list[str]:
    """Drop the schema ``name`` (every schema starting with it, with ``prefix``); returns
    the names dropped."""
    match = "starts_with(nspname, %s)" if prefix else "nspname = %s"
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        names = [
            r[0] for r in conn.execute(f"SELECT nspname FROM pg_namespace WHERE {match}", [name])
        ]
        for name in names:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
    return names


def _sweep() -> None:
    with contextlib.suppress(Exception):
        drop_schemas(SESSION + "_", prefix=True)


def new_schema() -> str:
    global _used
    if not _used:  # conformance runs use the factory without this module's fixtures
        atexit.register(_sweep)
    _used = True
    return f"{SESSION}_{next(_schemas)}"


@contextmanager
def postgres_saver(tmp_path: Path | None = None, **options: Any) -> Iterator[PostgresSaver]:
    """A set-up saver in a fresh schema of this session's, dropped on exit.

    This is the factory the shared conformance suite runs the PostgreSQL saver with. Given a
    ``schema`` (another saver's), it opens a second saver on it and leaves the schema alone.
    """
    url = options.pop("url", None) or require_postgres()
    shared = options.pop("schema", None)
    schema = shared or new_schema()
    saver = PostgresSaver(url, schema=schema, **options)
    try:
        saver.setup()
        yield saver
    finally:
        saver.close()
        if shared is None:
            drop_schemas(schema)


@pytest.fixture(scope="module", autouse=True)
def _session_schemas_are_dropped() -> Iterator[None]:
    yield
    if _used:
        drop_schemas(SESSION + "_", prefix=True)
        assert drop_schemas(SESSION + "_", prefix=True) == []


@pytest.fixture
def url() -> str:
    return require_postgres()


@pytest.fixture
def saver() -> Iterator[PostgresSaver]:
    with postgres_saver() as s:
        yield s


def query(schema: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run ``statement`` with ``{s}`` standing for the schema; returns its rows."""
    text = sql.SQL(statement).format(s=sql.Identifier(schema))
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        cur = conn.execute(text, params)
        return cur.fetchall() if cur.description else []


def count(schema: str, table: str) -> int:
    return query(schema, f"SELECT count(*) FROM {{s}}.threadline_{table}")[0][0]


def chain(thread_id: str, n: int, *, size: int = 100) -> list[CheckpointRecord]:
    """``n`` records of a growing conversation, as the engine would save them. ("step" and
    "fixed" are lists so that they are stored as blobs: small scalars live in the rows.)"""
    records: list[CheckpointRecord] = []
    parent: Checkpoint | None = None
    for i in range(n):
        values = {"messages": [item(j, size) for j in range(i + 1)], "step": [i], "fixed": ["f"]}
        record = step(thread_id, values, parent, metadata={"i": i})
        records.append(record)
        parent = record.checkpoint
    return records


# -- counting what goes over the wire ------------------------------------------------------------


class WireCounter:
    """A TCP proxy to the server that counts round trips and records the SQL sent through it.

    A turn starts each time the client sends after the server last spoke: a round trip. Each
    execution is recorded at its Bind message (prepared statements are parsed once only).
    ``received`` counts the bytes the server sent.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.lock = threading.Lock()
        self.turns = 0
        self.received = 0
        self.statements: list[str] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self.lock:
            self.turns = 0
            self.received = 0
            self.statements.clear()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            state = {"last": "server", "buffer": b"", "started": False}
            threading.Thread(
                target=self._pump, args=(client, server, True, state), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, False, state), daemon=True
            ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool, state: Any) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            with self.lock:
                if upstream:
                    if state["last"] == "server" and state["started"]:
                        self.turns += 1
                    state["last"] = "client"
                    self._parse(state, data)
                else:
                    state["last"] = "server"
                    self.received += len(data)
            try:
                dst.sendall(data)
            except OSError:
                return

    def _parse(self, state: Any, data: bytes) -> None:
        """Pick the SQL out of the client's messages (startup first, then typed messages)."""
        buf = state["buffer"] + data
        while True:
            if not state["started"]:
                if len(buf) < 8:
                    break
                (length, code) = struct.unpack("!ii", buf[:8])
                if len(buf) < length:
                    break
                buf = buf[length:]
                if code not in (80877103, 80877104):  # SSLRequest, GSSENCRequest
                    state["started"] = True
                continue
            if len(buf) < 5:
                break
            kind = buf[:1]
            (length,) = struct.unpack("!i", buf[1:5])
            if len(buf) < 1 + length:
                break
            body, buf = buf[5 : 1 + length], buf[1 + length :]
            if kind == b"Q":  # simple query
                self.statements.append(body.split(b"\0", 1)[0].decode())
            elif kind == b"P":  # Parse: remember the statement by name ("" for unnamed)
                name, text = body.split(b"\0")[:2]
                state.setdefault("named", {})[name] = text.decode()
            elif kind == b"B":  # Bind: one execution of a parsed (maybe prepared) statement
                name = body.split(b"\0")[1]
                self.statements.append(state.get("named", {}).get(name, "?"))
        state["buffer"] = buf

    def url(self, url: str) -> str:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        netloc_s = f"{netloc[0]}@{host}" if len(netloc) == 2 else host
        q = "sslmode=disable" + ("&" + parts.query if parts.query else "")
        return urlunsplit((parts.scheme, netloc_s, parts.path, q, parts.fragment))

    def keywords(self, word: str) -> int:
        return sum(1 for s in self.statements if s.strip().upper().startswith(word))


@pytest.fixture
def wire(url: str) -> Iterator[WireCounter]:
    parts = urlsplit(url)
    counter = WireCounter((parts.hostname or "127.0.0.1", parts.port or 5432))
    yield counter
    counter.close()


@pytest.fixture
def counted(wire: WireCounter, url: str) -> Iterator[tuple[PostgresSaver, WireCounter]]:
    with postgres_saver(url=wire.url(url)) as s:
        yield s, wire


# -- round trips and transactions ----------------------------------------------------------------


def test_put_is_one_round_trip_and_one_transaction(
    counted: tuple[PostgresSaver, WireCounter],
) -> None:
    saver, wire = counted
    records = chain("t1", 12)
    saver.put(records[0])  # opens the pool
    for record in records[1:]:
        wire.reset()
        saver.put(record)
        assert wire.turns == 1, wire.statements
        assert len(wire.statements) == 1 and "threadline_put" in wire.statements[0]
    # The growing list went in as deltas (the cache knew every base: no extra query).
    deltas = "SELECT count(*) FROM {s}.threadline_blobs WHERE base IS NOT NULL"
    assert query(saver.schema, deltas)[0][0] >= 5
    # A put with pending writes and retention is still one round trip.
    last = records[-1].checkpoint
    nxt = step("t1", {"messages": ["new"]}, last, writes=(w("a", value=1), w("b", "error", "x")))
    saver.retention = Retention(max_checkpoints=5)
    wire.reset()
    saver.put(nxt)
    assert wire.turns == 1
    assert wire.keywords("BEGIN") == 1 and wire.keywords("COMMIT") == 1, wire.statements
    assert len(list(saver.list("t1"))) == 5


def test_reads_and_writes_round_trips(counted: tuple[PostgresSaver, WireCounter]) -> None:
    saver, wire = counted
    records = chain("t1", 5)
    for record in records:
        saver.put(record)
    head = records[-1].checkpoint
    trips: dict[str, int] = {}

    def measure(name: str, action: Any) -> None:
        wire.reset()
        action()
        trips[name] = wire.turns

    measure("get_tuple", lambda: saver.get_tuple("t1"))
    measure("get_tuple by id", lambda: saver.get_tuple("t1", "", records[1].checkpoint.id))
    measure("put_writes", lambda: saver.put_writes("t1", "", head.id, [w("x", value=1)]))
    measure("list", lambda: list(saver.list("t1")))
    measure("list filter", lambda: list(saver.list("t1", filter={"i": 2})))
    measure("list_threads", lambda: saver.list_threads())
    measure("prune", lambda: saver.prune("t1", keep_last=3))
    measure("copy_thread", lambda: saver.copy_thread("t1", "t2"))
    measure("delete_thread", lambda: saver.delete_thread("t2"))
    assert trips == {
        "get_tuple": 1,
        "get_tuple by id": 1,
        "put_writes": 1,
        "list": 1,
        "list filter": 1,  # the page brings its values: one statement
        "list_threads": 1,
        "prune": 1,
        "copy_thread": 2,
        "delete_thread": 1,
    }


async def test_aput_is_one_round_trip(counted: tuple[PostgresSaver, WireCounter]) -> None:
    saver, wire = counted
    records = chain("t1", 6)
    await saver.aput(records[0])
    for record in records[1:]:
        wire.reset()
        await saver.aput(record)
        assert wire.turns == 1
        assert len(wire.statements) == 1 and "threadline_put" in wire.statements[0]
    wire.reset()
    got = await saver.aget_tuple("t1")
    assert wire.turns == 1
    assert got is not None and got.checkpoint == records[-1].checkpoint


def test_a_cold_cache_costs_one_query(url: str, wire: WireCounter) -> None:
    warm, cold = chain("warm", 5), chain("t1", 5)
    with postgres_saver(url=wire.url(url)) as first:
        for record in [*warm, *cold[:4]]:
            first.put(record)
        # A second saver (another process, say) extends the list: it must look the base up.
        with postgres_saver(url=wire.url(url), schema=first.schema) as second:
            second.get_tuple("nobody")  # open its pool
            second.put(chain("other", 1)[0])  # the connection prepares the put statement once
            wire.reset()
            second.put(cold[4])
            assert wire.turns == 2  # the base's metadata, then the put
            got = second.get_tuple("t1")
            assert got is not None and got.checkpoint == cold[4].checkpoint
        # Stored as a delta all the same, as the saver that knew the base stored it.
        bases = [
            query(
                first.schema,
                "SELECT base IS NOT NULL FROM {s}.threadline_blobs"
                " WHERE thread_id = %s AND key = 'messages' AND version = %s",
                [r.thread_id, r.checkpoint.versions["messages"]],
            )
            for r in (warm[4], cold[4])
        ]
        assert bases == [[(True,)], [(True,)]]


# -- concurrency ---------------------------------------------------------------------------------


def _app_url(url: str, name: str) -> str:
    return url + ("&" if "?" in url else "?") + f"application_name={name}"


def _waiting(app: str) -> int:
    rows = query(
        "public",
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        " AND wait_event_type = 'Lock'",
        [app],
    )
    return rows[0][0]


async def test_concurrent_aputs_are_sent_together(url: str) -> None:
    """50 tasks put on 50 threads at once: their puts go in at most ``batcher.SENDERS``
    statements (``threadline_put_many``), not one connection and round trip each.

    The checkpoints table is locked first, so every statement that reaches the server waits
    there; the number of connections waiting at once is how many statements are in flight.
    """
    app = f"tl-{uuid.uuid4().hex[:10]}"
    with postgres_saver(url=_app_url(url, app), pool_size=10) as saver:
        await saver.aget_tuple("warm-up")
        records = [step(f"thread-{k}", {"k": k}, None) for k in range(50)]
        with psycopg.connect(url) as blocker:
            blocker.execute(
                sql.SQL("LOCK TABLE {}.threadline_checkpoints IN EXCLUSIVE MODE").format(
                    sql.Identifier(saver.schema)
                )
            )
            tasks = [asyncio.create_task(saver.aput(r)) for r in records]
            waits = []
            for _ in range(10):
                await asyncio.sleep(0.05)
                waits.append(await asyncio.to_thread(_waiting, app))
            assert not any(t.done() for t in tasks)
            blocker.rollback()  # release the lock
        await asyncio.gather(*tasks)
        assert 1 <= max(waits) <= batcher.SENDERS
        for record in records:
            got = await saver.aget_tuple(record.thread_id)
            assert got is not None and got.checkpoint == record.checkpoint


async def test_a_put_that_loses_its_race_fails_alone_in_its_batch(saver: PostgresSaver) -> None:
    firsts = [step(f"t{k}", {"k": k}, None) for k in range(6)]
    await asyncio.gather(*(saver.aput(r) for r in firsts))
    rival = step("t3", {"k": "rival"}, firsts[3].checkpoint)
    await saver.aput(rival)  # t3 moved on: a child of its first checkpoint now loses
    children = [step(f"t{k}", {"k": k + 10}, firsts[k].checkpoint) for k in range(6)]
    results = await asyncio.gather(*(saver.aput(r) for r in children), return_exceptions=True)
    assert [type(r).__name__ for r in results] == [
        "NoneType",
        "NoneType",
        "NoneType",
        "ConcurrentUpdateError",
        "NoneType",
        "NoneType",
    ]
    for k, child in enumerate(children):
        got = await saver.aget_tuple(f"t{k}")
        expected = rival if k == 3 else child
        assert got is not None and got.checkpoint == expected.checkpoint


def test_put_writes_and_puts_on_one_thread_do_not_deadlock(saver: PostgresSaver) -> None:
    first = step("t1", {"i": 0}, None)
    saver.put(first)
    head: list[Checkpoint] = [first.checkpoint]
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(k: int) -> None:
        try:
            n = 0
            while not stop.is_set():
                cp = head[-1]
                saver.put_writes("t1", "", cp.id, [w(f"task-{k}-{n % 3}", value=n)])
                n += 1
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
    for t in workers:
        t.start()
    try:
        for i in range(1, 40):
            record = step("t1", {"i": i}, head[-1], writes=(w("task-0-0", value=-i),))
            saver.put(record)
            head.append(record.checkpoint)
    finally:
        stop.set()
        for t in workers:
            t.join()
    assert errors == []
    assert [r.checkpoint.id for r in saver.list("t1")] == [cp.id for cp in reversed(head)]


_RACER = """
import json, sys, time
from datetime import UTC, datetime
from threadline.checkpoint.base import Checkpoint, CheckpointRecord
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.postgres import PostgresSaver
from threadline.errors import ConcurrentUpdateError

name, url, schema = sys.argv[1:4]
with PostgresSaver(url, schema=schema) as saver:
    saver.get_tuple("warm-up")
    print(json.dumps({"ready": name}), flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        cid = new_checkpoint_id()
        values = {"who": name, "round": order["round"]}
        cp = Checkpoint(cid, order["parent"], order["step"] + 1, values,
                        {"who": cid, "round": cid}, (), datetime.now(UTC).isoformat())
        while time.time() < order["at"]:
            pass
        try:
            saver.put(CheckpointRecord(order["thread"], "", cp, {"who": name}))
            print(json.dumps({"won": cid}), flush=True)
        except ConcurrentUpdateError as exc:
            print(json.dumps({"lost": str(exc)}), flush=True)
"""


def test_two_processes_racing_on_one_parent(saver: PostgresSaver, tmp_path: Path) -> None:
    """Two OS processes put children of the same parent at the same instant, 20 times: each
    time exactly one wins, and the history stays one line."""
    script = tmp_path / "racer.py"
    script.write_text(textwrap.dedent(_RACER))
    racers = [
        subprocess.Popen(
            [sys.executable, str(script), name, saver.url, saver.schema],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None
            assert "ready" in json.loads(racer.stdout.readline())
        root = step("race", {"who": "root", "round": 0}, None)
        saver.put(root)
        head = root.checkpoint
        wins = {"a": 0, "b": 0}
        for round_ in range(1, 21):
            order = {
                "thread": "race",
                "parent": head.id,
                "step": head.step,
                "round": round_,
                "at": time.time() + 0.05,
            }
            for racer in racers:
                assert racer.stdin is not None
                racer.stdin.write(json.dumps(order) + "\n")
                racer.stdin.flush()
            answers = [json.loads(r.stdout.readline()) for r in racers]  # type: ignore[union-attr]
            won = [a["won"] for a in answers if "won" in a]
            lost = [a["lost"] for a in answers if "lost" in a]
            assert len(won) == 1 and len(lost) == 1, answers
            assert head.id in lost[0] and won[0] in lost[0]  # names expected and actual head
            got = saver.get_tuple("race")
            assert got is not None and got.checkpoint.id == won[0]
            wins[got.checkpoint.values["who"]] += 1
            head = got.checkpoint
        history = list(saver.list("race"))
        assert len(history) == 21
        for newer, older in itertools.pairwise(history):
            assert newer.checkpoint.parent_id == older.checkpoint.id
            assert newer.checkpoint.values["round"] == older.checkpoint.values["round"] + 1
        assert history[-1].checkpoint.id == root.checkpoint.id
    finally:
        for racer in racers:
            if racer.stdin is not None:
                racer.stdin.close()
        for racer in racers:
            racer.wait(timeout=30)
    assert all(r.returncode == 0 for r in racers)


# -- setup, schema versions, isolation -----------------------------------------------------------


def test_setup_is_idempotent_and_safe_to_run_concurrently(url: str) -> None:
    schema = new_schema()
    savers = [PostgresSaver(url, schema=schema) for _ in range(8)]
    gate = threading.Barrier(len(savers))
    errors: list[BaseException] = []

    def run(s: PostgresSaver) -> None:
        try:
            gate.wait()
            s.setup()
            s.setup()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in savers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert query(schema, "SELECT version FROM {s}.threadline_schema_version") == [
            (SCHEMA_VERSION,)
        ]
        tables = query(
            schema,
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1",
            [schema],
        )
        assert [t[0] for t in tables] == [
            "threadline_blobs",
            "threadline_checkpoints",
            "threadline_heads",
            "threadline_schema_version",
            "threadline_writes",
        ]
        savers[0].put(step("t1", {"x": 1}, None))
        assert savers[-1].get_tuple("t1") is not None
    finally:
        for s in savers:
            s.close()
        drop_schemas(schema)


async def test_tables_of_a_newer_threadline_are_refused(url: str) -> None:
    with postgres_saver() as saver:
        query(
            saver.schema,
            "UPDATE {s}.threadline_schema_version SET version = %s",
            [SCHEMA_VERSION + 1],
        )
        for call in ("setup", "get_tuple", "put"):
            with PostgresSaver(url, schema=saver.schema) as other:
                with pytest.raises(SaverUnavailableError) as info:
                    if call == "setup":
                        other.setup()
                    elif call == "get_tuple":
                        other.get_tuple("t1")
                    else:
                        other.put(step("t1", {"x": 1}, None))
                assert f"schema version {SCHEMA_VERSION + 1}" in str(info.value)
                assert "upgrade threadline" in str(info.value)
        other = PostgresSaver(url, schema=saver.schema)
        with pytest.raises(SaverUnavailableError, match="newer threadline"):
            await other.aget_tuple("t1")
        await other.aclose()


def test_setup_migrates_an_older_schema_and_keeps_its_data(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A synthetic next version adds a column and needs ``threadline_put`` made again: a schema
    at the current version (its function dropped) is brought to the next by ``setup``, and its
    checkpoints load and can be built on; a schema older than any migration (version 1: the
    loop's metadata as bytes) is refused."""
    records = chain("t1", 4)
    current, synthetic = SCHEMA_VERSION, SCHEMA_VERSION + 1
    with postgres_saver() as old:
        for record in records[:3]:
            old.put(record)
        query(old.schema, "DROP FUNCTION {s}.threadline_put")
        monkeypatch.setattr(saver_module, "SCHEMA_VERSION", synthetic)
        monkeypatch.setattr(connections_module, "SCHEMA_VERSION", synthetic)
        monkeypatch.setattr(
            saver_module, "MIGRATIONS", {current: ("ALTER TABLE {blobs} ADD COLUMN note text",)}
        )
        with PostgresSaver(url, schema=old.schema) as new:
            with pytest.raises(SaverUnavailableError, match=r"call saver.setup\(\)"):
                new.put(records[3])
            new.setup()
            new.setup()  # migrated once: the column is not added again
            versions = query(old.schema, "SELECT version FROM {s}.threadline_schema_version")
            assert versions == [(synthetic,)]
            assert query(old.schema, "SELECT count(note) FROM {s}.threadline_blobs") == [(0,)]
            got = new.get_tuple("t1")
            assert got is not None and got.checkpoint == records[2].checkpoint
            new.put(records[3])
            assert [r.checkpoint for r in new.list("t1")] == [
                r.checkpoint for r in reversed(records)
            ]
        query(old.schema, "UPDATE {s}.threadline_schema_version SET version = 1")
        with (
            PostgresSaver(url, schema=old.schema) as new,
            pytest.raises(SaverUnavailableError, match="format version 1, which this"),
        ):
            new.setup()


def put_and_list_rows(saver: PostgresSaver, records: list[CheckpointRecord]) -> list[Any]:
    """(is full, chain_bytes, length of data) of each stored row of ``messages``."""
    for record in records:
        saver.put(record)
    return query(
        saver.schema,
        "SELECT base IS NULL, chain_bytes, length(data) FROM {s}.threadline_blobs"
        " WHERE key = 'messages'",
    )


@pytest.fixture()
def eager_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full copies after 16 KB of deltas (twice the last copy): compaction in a small test."""
    monkeypatch.setattr(PostgresBackend, "compaction", Compaction(ratio=2.0, rewrite_full=False))


def test_a_growing_list_is_stored_once_as_deltas(saver: PostgresSaver) -> None:
    """The default policy: no full copy until the deltas pass 1 MiB, so a 300 KB list is its
    first (empty) blob and one delta per step, each item stored once."""
    records = chain("t1", 150, size=2000)
    rows = put_and_list_rows(saver, records)
    assert sum(1 for full, _, _ in rows if full) == 1 and len(rows) == 150
    assert all(chain > 0 for full, chain, _ in rows if not full)  # no prefix rows
    final = records[-1].checkpoint.values["messages"]
    assert sum(r[2] for r in rows) < 1.05 * len(serde.DEFAULT.dumps(final))


@pytest.mark.usefixtures("eager_compaction")
def test_compaction_keeps_full_blobs_and_drops_the_deltas_they_hold(
    saver: PostgresSaver,
) -> None:
    """PostgreSQL keeps an updated row's TOAST until a vacuum: old full blobs stay (fewer,
    growing geometrically), and the deltas each new one holds become prefix rows."""
    records = chain("t1", 150, size=2000)
    rows = put_and_list_rows(saver, records)
    fulls = [r for r in rows if r[0]]
    prefixes = [r for r in rows if not r[0] and r[1] == 0]
    assert 2 <= len(fulls) <= 6 and len(prefixes) > 60 and all(r[2] == 0 for r in prefixes)
    final = records[-1].checkpoint.values["messages"]
    assert sum(r[2] for r in rows) < 2.5 * len(serde.DEFAULT.dumps(final))
    with PostgresSaver(saver.url, schema=saver.schema) as fresh:  # no cache: all from SQL
        for record in records[::7]:
            got = fresh.get_tuple("t1", "", record.checkpoint.id)
            assert got is not None and got.checkpoint == record.checkpoint


def test_missing_tables_say_to_call_setup(url: str) -> None:
    with PostgresSaver(url, schema=new_schema()) as saver:
        with pytest.raises(SaverUnavailableError, match=r"call saver.setup\(\)"):
            saver.get_tuple("t1")
        with pytest.raises(SaverUnavailableError, match=r"call saver.setup\(\)"):
            saver.put(step("t1", {"x": 1}, None))


def test_schemas_keep_savers_apart(url: str) -> None:
    odd = new_schema() + ' we"ird. schema'  # quoted identifiers all the way
    with postgres_saver() as a, postgres_saver(schema=odd) as b:
        assert a.schema != b.schema
        ra = step("t1", {"who": "a"}, None)
        rb = step("t1", {"who": "b"}, None)
        a.put(ra)
        b.put(rb)  # parent None: b's thread t1 is empty, whatever a holds
        got_a, got_b = a.get_tuple("t1"), b.get_tuple("t1")
        assert got_a is not None and got_a.checkpoint.values == {"who": "a"}
        assert got_b is not None and got_b.checkpoint.values == {"who": "b"}
        assert [t.thread_id for t in b.list_threads()] == ["t1"]
        b.delete_thread("t1")
        assert a.get_tuple("t1") is not None
    assert drop_schemas(odd) == [odd]  # (a schema given to the factory is the caller's)
    left = "SELECT nspname FROM pg_namespace WHERE nspname IN (%s, %s)"
    left = query("public", left, [a.schema, b.schema])
    assert left == []  # the factory dropped its own schema


def test_from_conn_string_and_from_url_set_up(url: str) -> None:
    from threadline.checkpoint.urls import from_url

    schema = new_schema()
    try:
        with PostgresSaver.from_conn_string(url, schema=schema) as saver:
            saver.put(step("t1", {"x": 1}, None))
        with from_url(url, schema=schema) as again:
            assert isinstance(again, PostgresSaver)
            got = again.get_tuple("t1")
            assert got is not None and got.checkpoint.values == {"x": 1}
    finally:
        drop_schemas(schema)


# -- errors --------------------------------------------------------------------------------------


def _dead_url(url: str, password: str) -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    parts = urlsplit(url)
    user = parts.username or "root"
    return urlunsplit((parts.scheme, f"{user}:{password}@127.0.0.1:{port}", parts.path, "", ""))


async def test_an_unreachable_server_is_reported_without_the_password(url: str) -> None:
    secret = "s3cr3t-pw"
    dead = _dead_url(url, secret)
    saver = PostgresSaver(dead, connect_timeout=2)
    for action in (saver.setup, lambda: saver.get_tuple("t1")):
        with pytest.raises(SaverUnavailableError) as info:
            action()
        message = str(info.value)
        assert "cannot reach PostgreSQL" in message and ":***@127.0.0.1:" in message
        assert secret not in message and secret not in repr(saver)
    with pytest.raises(SaverUnavailableError) as ainfo:
        await saver.aput(step("t1", {"x": 1}, None))
    assert ":***@" in str(ainfo.value) and secret not in str(ainfo.value)
    await saver.aclose()


def test_mask_url() -> None:
    assert mask_url("postgresql://u:pw@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert mask_url("postgresql://h/db?password=pw&sslmode=x") == (
        "postgresql://h/db?password=***&sslmode=x"
    )
    assert mask_url("host=h password='p w' dbname=d") == "host=h password=*** dbname=d"


def test_a_closed_saver_refuses_calls(url: str) -> None:
    with postgres_saver() as saver:
        saver.put(step("t1", {"x": 1}, None))
    saver.close()  # idempotent
    with pytest.raises(SaverUnavailableError, match="closed"):
        saver.get_tuple("t1")


def _corrupt(schema: str, key: str, how: str) -> int:
    if how == "truncate":
        statement = "UPDATE {s}.threadline_blobs SET data = substring(data from 1 for 3)"
    else:  # same length, one byte changed: only the checksum can tell
        statement = (
            "UPDATE {s}.threadline_blobs SET data = set_byte(data, length(data) - 1,"
            " (get_byte(data, length(data) - 1) + 1) %% 256)"
        )
    rows = query(schema, statement + " WHERE key = %s RETURNING version", [key])
    return len(rows)


@pytest.mark.parametrize("how", ["truncate", "flip"])
async def test_a_damaged_value_fails_naming_its_key(saver: PostgresSaver, how: str) -> None:
    records = chain("t1", 4)
    for record in records:
        saver.put(record)
    saver.put_writes("t1", "", records[-1].checkpoint.id, [w("a", value=1)])
    assert _corrupt(saver.schema, "messages", how) >= 2  # a full blob and deltas
    with postgres_saver(schema=saver.schema) as fresh:  # nothing cached
        with pytest.raises(SerializationError, match="'messages'"):
            fresh.get_tuple("t1")
        with pytest.raises(SerializationError, match="'messages'"):
            await fresh.aget_tuple("t1", "", records[0].checkpoint.id)
        with pytest.raises(SerializationError, match="'messages'"):
            list(fresh.list("t1"))


# -- storage -------------------------------------------------------------------------------------


def _stored(schema: str, thread_id: str) -> dict[tuple[str, str], BlobRow]:
    rows = query(
        schema,
        "SELECT key, version, start, base, chain_bytes, full_bytes FROM {s}.threadline_blobs"
        " WHERE thread_id = %s",
        [thread_id],
    )
    return {(r[0], r[1]): BlobRow(*r, b"") for r in rows}


def _kept(schema: str, thread_id: str) -> list[dict[str, str]]:
    """The blob versions of each checkpoint of the thread."""
    rows = query(
        schema,
        "SELECT checkpoint_id, body FROM {s}.threadline_checkpoints WHERE thread_id = %s",
        [thread_id],
    )
    return [body_versions(r[1], r[0]) or {} for r in rows]


@pytest.mark.parametrize("how", ["prune", "retention"])
def test_pruning_keeps_exactly_the_blobs_kept_checkpoints_use(url: str, how: str) -> None:
    retention = Retention(max_checkpoints=3) if how == "retention" else None
    with postgres_saver(retention=retention) as saver:
        records = chain("t1", 30, size=50)
        for record in records:
            saver.put(record)
        # A fork from an old checkpoint shares the list's chain.
        fork = step("t1", {**records[20].checkpoint.values, "step": [-1]}, records[20].checkpoint)
        if how == "prune":
            saver.put(fork, fork=True)
            assert saver.prune("t1", keep_last=3) == 28
        stored = _stored(saver.schema, "t1")
        assert any(b.base is not None for b in stored.values())
        assert set(stored) == referenced_blobs(_kept(saver.schema, "t1"), stored)
        expected = [fork, *records[-2:]] if how == "prune" else records[-3:]
        assert [r.checkpoint.id for r in saver.list("t1")] == [
            r.checkpoint.id for r in reversed(sorted(expected, key=lambda r: r.checkpoint.id))
        ]
        for r in expected:
            got = saver.get_tuple("t1", "", r.checkpoint.id)
            assert got is not None and got.checkpoint == r.checkpoint
        # Emptied: the thread is gone with every blob.
        assert saver.prune("t1", keep_last=0) == 3
        assert _stored(saver.schema, "t1") == {} and saver.list_threads() == []
        assert count(saver.schema, "heads") == 0


@pytest.mark.parametrize("use_async", [False, True], ids=["put", "aput"])
def test_values_the_hints_wrongly_call_stored_are_stored_in_full(
    saver: PostgresSaver, use_async: bool
) -> None:
    records = chain("t1", 3)
    for record in records:
        saver.put(record)
    # Another process pruned blobs from under this saver's cache: the next delta's base is
    # gone, and so is a value the hints call unchanged. The put finds out in its transaction
    # and is retried once with those values stored whole.
    query(saver.schema, "DELETE FROM {s}.threadline_blobs WHERE key IN ('messages', 'fixed')")
    prev = records[-1].checkpoint
    cid = new_checkpoint_id()
    cp = Checkpoint(
        cid,
        prev.id,
        prev.step + 1,
        {**prev.values, "messages": [*prev.values["messages"], "m"], "step": [9]},
        {**prev.versions, "messages": cid, "step": cid},
        (),
        datetime.now(UTC).isoformat(),
    )
    extends = {"messages": (prev.versions["messages"], len(prev.values["messages"]))}
    changes = {"messages": Append(*extends["messages"]), "step": SET}
    record = ChangedRecord("t1", "", cp, {}, (), changes)
    if use_async:  # through the batcher: the retry too
        asyncio.run(saver.aput(record))
    else:
        saver.put(record)
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == cp
    blobs = _stored(saver.schema, "t1")
    assert blobs[("messages", cid)].base is None  # stored whole
    assert ("fixed", prev.versions["fixed"]) in blobs


def test_a_put_prepares_its_statement_again_when_the_server_forgot_it() -> None:
    """A sync put runs a statement prepared on each connection (``driver.Hot``); after a
    ``DEALLOCATE ALL`` (or a pooler's reset) it is prepared again, and nothing is lost."""
    with postgres_saver(pool_size=1) as saver:
        records = chain("t1", 3)
        saver.put(records[0])
        with saver._db._sync_pool().connection() as conn:  # the pool's only connection
            names = [r[0] for r in conn.execute("SELECT name FROM pg_prepared_statements")]
            assert any(n.startswith("threadline_put_") for n in names)
            conn.execute("DEALLOCATE ALL")
        saver.put(records[1])
        saver.put(records[2])
        assert [r.checkpoint for r in saver.list("t1")] == [r.checkpoint for r in reversed(records)]


def test_list_threads_pages_through_many_threads(saver: PostgresSaver) -> None:
    for k in range(300):
        nxt = (PlannedTask("ask"),) if k % 3 == 0 else ()
        cp = make_cp({"k": k}, next=nxt)
        saver.put(rec(f"t{k:03d}", cp, writes=(w("x", "interrupt", 1),) if k % 3 == 0 else ()))
    every = saver.list_threads()
    assert [t.thread_id for t in every] == [f"t{k:03d}" for k in reversed(range(300))]
    interrupted = saver.list_threads(status="interrupted")
    assert [t.thread_id for t in interrupted] == [f"t{k:03d}" for k in reversed(range(0, 300, 3))]
    assert all(t.next == ("ask",) for t in interrupted)
    assert [t.thread_id for t in saver.list_threads(status="idle", limit=5)] == [
        "t299",
        "t298",
        "t296",
        "t295",
        "t293",
    ]
    updated = [datetime.fromisoformat(t.updated_at) for t in every]
    assert updated == sorted(updated, reverse=True)
    assert all(
        u.tzinfo is not None and u <= datetime.now(UTC) + timedelta(seconds=5) for u in updated
    )


def test_one_saver_across_event_loops(saver: PostgresSaver) -> None:
    record = step("t1", {"x": 1}, None)

    async def put() -> None:
        await saver.aput(record)

    async def get() -> Any:
        return await saver.aget_tuple("t1")

    asyncio.run(put())
    got = asyncio.run(get())  # a new loop gets its own pool
    assert got is not None and got.checkpoint == record.checkpoint


def test_a_connection_dropped_under_a_put_is_reported_and_the_next_put_reconnects(
    url: str,
) -> None:
    """The sync put runs on libpq itself: a dead connection must still be the saver's
    ``SaverUnavailableError`` (not a bare psycopg error), and lose nothing saved."""
    with postgres_saver(pool_size=1) as saver:
        first = step("t1", {"n": [1]}, None)
        saver.put(first)
        with psycopg.connect(url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND query LIKE %s",
                [f"%{saver.schema}%"],
            ).fetchone()
        assert killed is not None and killed[0] == 1
        second = step("t1", {"n": [1, 2]}, first.checkpoint)
        with pytest.raises(SaverUnavailableError, match="cannot reach PostgreSQL"):
            saver.put(second)
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == first.checkpoint
        saver.put(second)
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == second.checkpoint
