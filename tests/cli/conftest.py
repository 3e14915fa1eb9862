"""Fixtures of the CLI tests: a graph file, a SQLite file with paused threads, a runner."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from graphs_src import SOURCE

from threadline.checkpoint import SqliteSaver
from threadline.cli.app import app


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "flows.py"
    path.write_text(SOURCE)
    return path


@pytest.fixture
def flows(graph_file: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"flows_{id(graph_file)}", graph_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def db(tmp_path: Path, flows: ModuleType) -> Iterator[str]:
    """A SQLite file with thread ``a`` (approval, paused at ``ask``), ``r`` (a review, paused)
    and ``t`` (two interrupts waiting); the URL of it."""
    path = tmp_path / "app.db"
    saver = SqliteSaver(str(path))
    for thread_id, name, start in (
        ("a", "approval", {"topic": "cats"}),
        ("r", "reviewed", {}),
        ("t", "two", {}),
    ):
        graph = getattr(flows, name).compile(checkpointer=saver)
        graph.invoke(start, {"configurable": {"thread_id": thread_id}})
    saver.close()
    yield f"sqlite:///{path}"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, graph_file: Path) -> Callable[..., Any]:
    """Run ``threadline ARGS`` in ``tmp_path`` (where flows.py is), check its exit code;
    the result (``.json()`` parses its stdout)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("THREADLINE_DB", raising=False)
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> Any:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, (result.exit_code, result.output, result.exception)
        result.json = lambda: json.loads(result.stdout)
        return result

    return run
