"""A process killed with SIGKILL inside a task leaves a thread another process continues, and
the task that had finished before the kill does not run again."""

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
from tests.services import require_postgres
from threadline.checkpoint import from_url

# The child process imports this checkout's threadline, whatever the environment has installed.
CHILD_ENV = {**os.environ, "PYTHONPATH": str(Path(threadline.__file__).parents[1])}

APP = textwrap.dedent(
    """
    import json, os, sys, time
    from threadline.checkpoint import from_url
    from threadline.func import entrypoint, task

    def build(saver, workdir):
        def note(entry):
            with open(os.path.join(workdir, "ran"), "a") as f:
                f.write(entry + "\\n")  # a side effect that must not happen twice

        @task
        def charge(amount):
            note("charge")
            return f"charged {amount}"

        @task
        def ship(receipt):
            note("ship")
            if not os.path.exists(os.path.join(workdir, "resumed")):
                open(os.path.join(workdir, "hanging"), "w").close()
                time.sleep(60)  # killed here
            return f"shipped after {receipt}"

        @entrypoint(checkpointer=saver)
        def order(amount):
            receipt = charge(amount).result()
            return ship(receipt).result()

        return order

    if __name__ == "__main__":
        url, options, thread, workdir = sys.argv[1:5]
        order = build(from_url(url, **json.loads(options)), workdir)
        order.invoke(30, {"configurable": {"thread_id": thread}})
    """
)


@contextmanager
def store(backend: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'crash.db'}", {}
        return
    url = require_postgres()
    name = f"crash_{uuid.uuid4().hex[:12]}"
    yield url, {"schema": name}
    import psycopg  # present whenever require_postgres() passed

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_task_finished_before_a_kill_does_not_run_again(backend, tmp_path):
    script = tmp_path / "task_crash_app.py"
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
            assert time.monotonic() < deadline, "the run never reached the second task"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL

        (tmp_path / "resumed").touch()
        sys.path.insert(0, str(tmp_path))
        try:
            import task_crash_app  # type: ignore[import-not-found]
        finally:
            sys.path.remove(str(tmp_path))
            sys.modules.pop("task_crash_app", None)
        with from_url(url, **options) as saver:
            order = task_crash_app.build(saver, str(tmp_path))
            config = {"configurable": {"thread_id": "crash"}}
            assert order.get_state(config).next == ("order",)
            assert order.invoke(None, config) == "shipped after charged 30"
            steps = [s.metadata["step"] for s in order.get_state_history(config)]
        assert steps == [0, -1]
    ran = (tmp_path / "ran").read_text().split()
    assert ran == ["charge", "ship", "ship"]  # ship was cut off once; charge ran once
