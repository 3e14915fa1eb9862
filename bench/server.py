"""The server under load: runs/s and p50/p99 latency of a short run over HTTP (``make bench``).

    python -m bench.server                 # SQLite in-process, and PostgreSQL with 1, 2, 3 workers
    python -m bench.server --quick         # fewer runs
    python -m bench.server --only sqlite

Each setting starts a real server process (uvicorn) on a free port, warms it up, then measures
``POST /threads/{id}/runs/wait`` and ``/runs/stream`` one at a time (latency) and 16 at a time
(throughput), each run on a thread of its own. "direct" is the same graph's ``ainvoke`` on the
same saver in this process: the server's overhead is the difference. Targets and the reasons
for them: docs/performance.md, "The server".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

HERE = Path(__file__).parent
GRAPHS = {"short": f"{HERE / 'server_graphs.py'}:short"}
CONCURRENCY = 16


@dataclass
class Figures:
    name: str
    p50_ms: float
    p99_ms: float
    runs_per_s: float


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server_process(db: str, schema: str, workers: int) -> Iterator[str]:
    """A ``threadline serve`` process (in-process worker when ``workers`` is 0, else that many
    ``threadline worker`` processes beside an API server that runs nothing itself)."""
    port = _free_port()
    queue = "local" if workers == 0 else "procrastinate"
    setup = (
        "from threadline.server.settings import ServerSettings as S;"
        f"s = S(graphs={GRAPHS!r}, db={db!r}, schema={schema!r}, port={port}, queue={queue!r})"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", setup + ";from threadline.server.app import serve; serve(s)"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    procs += [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                setup + ";from threadline.server.worker import run_worker; run_worker(s)",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ok(url)
        yield url
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


def _wait_ok(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server at {url} did not start")


async def _wait_run(client: httpx.AsyncClient) -> None:
    thread = (await client.post("/threads", json={})).json()["thread_id"]
    body = {"assistant_id": "short", "input": {"text": "hi"}}
    reply = await client.post(f"/threads/{thread}/runs/wait", json=body)
    assert reply.json().get("reply") == "HI", reply.text


async def _stream_run(client: httpx.AsyncClient) -> None:
    thread = (await client.post("/threads", json={})).json()["thread_id"]
    body = {"assistant_id": "short", "input": {"text": "hi"}, "stream_mode": "values"}
    seen = 0
    async with client.stream("POST", f"/threads/{thread}/runs/stream", json=body) as response:
        async for line in response.aiter_lines():
            seen += line.startswith("event: values")
    assert seen == 2, seen


async def measure(name: str, one: Callable[[], Awaitable[None]], runs: int) -> Figures:
    for _ in range(5):
        await one()  # warm-up
    latencies = []
    for _ in range(runs):
        start = time.perf_counter()
        await one()
        latencies.append((time.perf_counter() - start) * 1000)
    started = time.perf_counter()
    pending = iter(range(runs))

    async def lane() -> None:
        for _ in pending:
            await one()

    await asyncio.gather(*(lane() for _ in range(CONCURRENCY)))
    rate = runs / (time.perf_counter() - started)
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return Figures(name, statistics.median(latencies), p99, rate)


async def over_http(url: str, label: str, runs: int) -> list[Figures]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        return [
            await measure(f"{label} wait", lambda: _wait_run(client), runs),
            await measure(f"{label} stream", lambda: _stream_run(client), runs),
        ]


async def direct(db: str, schema: str, runs: int) -> Figures:
    """The same graph and saver, called in this process: what the server adds to."""
    from bench.server_graphs import short
    from threadline.checkpoint.urls import from_url

    options = {"schema": schema} if db.startswith("postgres") else {}
    graph = short.compile(checkpointer=from_url(db, **options))

    async def one() -> None:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        out = await graph.ainvoke({"text": "hi"}, config)
        assert out["reply"] == "HI"

    return await measure("direct ainvoke", one, runs)


def settings_to_run(only: str | None) -> list[tuple[str, int]]:
    wanted = [("sqlite", 0), ("postgres", 1), ("postgres", 2), ("postgres", 3)]
    return [w for w in wanted if only is None or w[0] == only]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    runs = 40 if args.quick else 200
    pg = os.environ.get("THREADLINE_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
    print(f"{'case':<34} {'p50 ms':>8} {'p99 ms':>8} {'runs/s':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, workers in settings_to_run(args.only):
            schema = f"bench_{uuid.uuid4().hex[:8]}"
            db = f"sqlite:///{tmp}/{schema}.db" if kind == "sqlite" else pg
            label = f"{kind} in-process" if workers == 0 else f"{kind} {workers} worker(s)"
            try:
                with server_process(db, schema, workers) as url:
                    rows = asyncio.run(over_http(url, label, runs))
                if workers <= 1:
                    rows.append(asyncio.run(direct(db, schema, runs)))
            except Exception as exc:  # one setting failing must not hide the others
                print(f"{label:<34} failed: {type(exc).__name__}: {exc}")
                continue
            finally:
                if kind == "postgres":
                    _drop_schema(pg, schema)
            for f in rows:
                name = f.name if f.name.startswith(kind) else f"{kind} {f.name}"
                print(f"{name:<34} {f.p50_ms:>8.2f} {f.p99_ms:>8.2f} {f.runs_per_s:>8.1f}")


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()
