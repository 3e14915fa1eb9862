"""The compat shim renames ``langgraph`` imports to threadline's modules and does nothing else.

Each check runs in a fresh interpreter so the import hook never leaks into the test process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def run_with_shim(code: str) -> subprocess.CompletedProcess[str]:
    prelude = f"import sys; sys.path.insert(0, {str(HERE)!r}); import shim; shim.install()\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def test_langgraph_names_are_threadlines_own_objects() -> None:
    result = run_with_shim(
        """
        import threadline
        import threadline.checkpoint.memory
        from langgraph.graph import END, START, StateGraph
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.types import Command, interrupt
        from langgraph.config import get_config, get_stream_writer
        assert StateGraph is threadline.StateGraph
        assert (START, END) == (threadline.START, threadline.END)
        assert InMemorySaver is threadline.checkpoint.memory.InMemorySaver
        assert Command is threadline.Command and interrupt is threadline.interrupt
        assert get_config is threadline.get_config
        assert get_stream_writer is threadline.get_stream_writer
        import threadline.config
        assert get_config is threadline.config.get_config
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_a_module_threadline_lacks_is_reported_with_both_names() -> None:
    result = run_with_shim("import langgraph.no_such_module")
    assert result.returncode != 0
    assert "No module named 'langgraph.no_such_module'" in result.stderr
    assert "'threadline.no_such_module'" in result.stderr


def test_a_missing_name_is_an_import_error() -> None:
    result = run_with_shim("from langgraph.graph import NoSuchName")
    assert result.returncode != 0
    assert "ImportError: cannot import name 'NoSuchName' from 'langgraph.graph'" in result.stderr


def test_running_a_program_makes_it_main(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text(
        "import sys\nfrom langgraph.graph import StateGraph\n"
        "print(__name__, sys.argv[0].endswith('program.py'), StateGraph.__module__)\n"
    )
    result = subprocess.run(
        [sys.executable, str(HERE / "shim.py"), str(program)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "__main__ True threadline.graph.state_graph\n"


def test_the_names_of_issue_24_are_at_langgraphs_paths() -> None:
    """Each name imported from the module LangGraph 1.2.22 defines it in."""
    result = run_with_shim(
        """
        from langgraph.types import PregelTask, StateUpdate, TimeoutPolicy, TracePolicy
        from langgraph.runtime import DEFAULT_RUNTIME, RunControl, ServerInfo
        from langgraph.errors import GraphDrained, NodeError
        from langgraph.graph.message import push_message
        from langgraph.checkpoint.base import BaseCheckpointSaver
        from langgraph.prebuilt.interrupt import (
            ActionRequest, HumanInterrupt, HumanInterruptConfig, HumanResponse,
        )
        from langgraph.graph import START, StateGraph
        graph = StateGraph(dict).add_node("n", lambda s: s).add_edge(START, "n").compile()
        assert callable(graph.bulk_update_state) and callable(graph.abulk_update_state)
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"
