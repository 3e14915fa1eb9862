"""One writer per thread: two processes resuming the same thread at once cannot both win."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.services import require_postgres
from threadline.checkpoint import from_url

ROUNDS = 10  # each round is a fresh race between two processes

APP = textwrap.dedent(
    """
    import json, operator, os, sys, time
    from typing import Annotated, TypedDict
    from threadline import END, START, Command, StateGraph, interrupt
    from threadline.checkpoint import from_url
    from threadline.errors import ConcurrentUpdateError

    class State(TypedDict, total=False):
        log: Annotated[list[str], operator.add]

    def review(state):
        answer = interrupt("ok?")
        time.sleep(0.2)  # both processes are inside the step at the same time
        return {"log": [answer]}

    def build(saver):
        g = StateGraph(State)
        g.add_node("review", review)
        g.add_edge(START, "review")
        g.add_edge("review", END)
        return g.compile(checkpointer=saver)

    if __name__ == "__main__":
        url, options, thread, workdir, me = sys.argv[1:6]
        graph = build(from_url(url, **json.loads(options)))
        open(os.path.join(workdir, f"ready-{me}"), "w").close()
        while not os.path.exists(os.path.join(workdir, "go")):
            time.sleep(0.001)
        try:
            graph.invoke(Command(resume=me), {"configurable": {"thread_id": thread}})
            print("won")
        except ConcurrentUpdateError:
            print("lost")
    """
)


@contextmanager
def saver_url(backend: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """The URL and saver options of a fresh store; a PostgreSQL schema is dropped afterwards."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'race.db'}", {}
        return
    url = require_postgres()
    import psycopg  # present whenever require_postgres() passed

    schema = f"threadline_race_{uuid.uuid4().hex[:12]}"
    try:
        yield url, {"schema": schema}
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_processes_resuming_one_thread_one_wins(backend, tmp_path):
    with saver_url(backend, tmp_path) as (url, options):
        race_rounds(url, options, tmp_path)


def race_rounds(url: str, options: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(APP)
    sys.path.insert(0, str(tmp_path))
    try:
        import app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    saver = from_url(url, **options)
    for round_ in range(ROUNDS):
        thread = f"race-{uuid.uuid4()}"
        graph = app.build(saver)
        graph.invoke({"log": []}, {"configurable": {"thread_id": thread}})
        before = len(list(saver.list(thread)))
        results = race(script, [url, json.dumps(options), thread], tmp_path / f"round-{round_}")
        assert sorted(results) == ["lost", "won"], results
        history = list(saver.list(thread))
        parents = [r.checkpoint.parent_id for r in history]
        assert len(history) == before + 1  # only the winner's step was saved
        assert len(set(parents)) == len(parents), "two checkpoints share a parent: history forked"
        final = graph.get_state({"configurable": {"thread_id": thread}})
        assert final.next == () and len(final.values["log"]) == 1
        saver.delete_thread(thread)
    saver.close()


def race(script: Path, args: list[str], workdir: Path) -> list[str]:
    workdir.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), *args, str(workdir), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("p1", "p2")
    ]
    deadline = time.monotonic() + 60
    while not all((workdir / f"ready-{n}").exists() for n in ("p1", "p2")):
        assert time.monotonic() < deadline, "workers did not start"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    (workdir / "go").touch()
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outputs.append(out.strip())
    return outputs
