"""A process killed with SIGKILL mid-run leaves a thread that another process resumes exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import threadline
from tests.services import require_postgres, require_redis
from threadline.checkpoint import from_url

# The child process imports this checkout's threadline, whatever the environment has installed.
CHILD_ENV = {**os.environ, "PYTHONPATH": str(Path(threadline.__file__).parents[1])}

APP = textwrap.dedent(
    """
    import json, operator, os, sys, time
    from typing import Annotated, TypedDict
    from threadline import END, START, StateGraph
    from threadline.checkpoint import from_url

    class State(TypedDict, total=False):
        log: Annotated[list[str], operator.add]

    def build(saver, workdir):
        def step(name, hang=False):
            def node(state):
                with open(os.path.join(workdir, "ran"), "a") as f:
                    f.write(name + "\\n")  # a side effect that must not happen twice
                if hang and not os.path.exists(os.path.join(workdir, "resumed")):
                    open(os.path.join(workdir, "hanging"), "w").close()
                    time.sleep(60)  # killed here
                return {"log": [name]}
            return node

        g = StateGraph(State)
        g.add_node("a", step("a"))
        g.add_node("b", step("b", hang=True))
        g.add_node("c", step("c"))
        g.add_edge(START, "a")
        g.add_edge("a", "b")
        g.add_edge("b", "c")
        g.add_edge("c", END)
        return g.compile(checkpointer=saver)

    if __name__ == "__main__":
        url, options, thread, workdir = sys.argv[1:5]
        graph = build(from_url(url, **json.loads(options)), workdir)
        graph.invoke({"log": []}, {"configurable": {"thread_id": thread}})
    """
)


@contextmanager
def store(backend: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A fresh store of ``backend``: its URL and saver options; removed afterwards."""
    name = f"crash_{uuid.uuid4().hex[:12]}"
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'crash.db'}", {}
    elif backend == "files":
        yield f"file://{tmp_path / 'threads'}", {}
    elif backend == "redis":
        url = require_redis()
        yield url, {"prefix": name}
        import redis  # present whenever require_redis() passed

        with redis.Redis.from_url(url) as client:
            keys = list(client.scan_iter(match=f"{name}:*"))
            if keys:
                client.unlink(*keys)
    else:
        url = require_postgres()
        yield url, {"schema": name}
        import psycopg  # present whenever require_postgres() passed

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.mark.parametrize("backend", ["sqlite", "files", "postgres", "redis"])
def test_a_killed_run_resumes_in_another_process_without_repeating_steps(backend, tmp_path):
    script = tmp_path / "crash_app.py"
    script.write_text(APP)
    with store(backend, tmp_path) as (url, options):
        proc = subprocess.Popen(
            [sys.executable, str(script), url, json.dumps(options), "crash", str(tmp_path)],
            stderr=subprocess.PIPE,
            text=True,
            env=CHILD_ENV,
        )
        deadline = time.monotonic() + 60
        while not (tmp_path / "hanging").exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the run never reached node b"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL

        (tmp_path / "resumed").touch()
        sys.path.insert(0, str(tmp_path))
        try:
            import crash_app  # type: ignore[import-not-found]
        finally:
            sys.path.remove(str(tmp_path))
        with from_url(url, **options) as saver:
            graph = crash_app.build(saver, str(tmp_path))
            config = {"configurable": {"thread_id": "crash"}}
            stuck = graph.get_state(config)
            assert stuck.next == ("b",)
            assert stuck.values == {"log": ["a"]}
            assert saver.list_threads()[0].status == "running"

            assert graph.invoke(None, config) == {"log": ["a", "b", "c"]}
            history = list(graph.get_state_history(config))
        ran = (tmp_path / "ran").read_text().split()
        assert ran == ["a", "b", "b", "c"]  # b was cut off once; nothing finished ran again
        steps = [snap.metadata["step"] for snap in history]
        assert steps == [3, 2, 1, 0, -1]
        parents = [snap.parent_config for snap in history]
        assert all(p is not None for p in parents[:-1]) and parents[-1] is None
