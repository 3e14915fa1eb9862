"""The two libraries under test, behind one small adapter each.

Both libraries use the same names (``StateGraph``, ``START``, ``END``, ``Send``, ``Command``,
``interrupt``), so each workload in ``workloads.py`` is written once against ``lib.<name>`` and
built for each library from its own classes: the threadline implementation and the LangGraph
implementation are the same code, which is what guarantees they have the same shape. What really
differs (imports, savers, how to reach a saver's SQLite connection) lives here and in
``backends.py``.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import Any


class LibraryMissing(RuntimeError):
    """The library is not importable in this interpreter (e.g. LangGraph outside the peer venv)."""


@dataclass
class Lib:
    """One library's public names, as the workloads use them."""

    name: str
    version: str
    StateGraph: Any
    START: Any
    END: Any
    Send: Any
    Command: Any
    interrupt: Any

    def __repr__(self) -> str:
        return f"<{self.name} {self.version}>"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def load_threadline() -> Lib:
    import threadline

    return Lib(
        name="threadline",
        version=_version("threadline"),
        StateGraph=threadline.StateGraph,
        START=threadline.START,
        END=threadline.END,
        Send=threadline.Send,
        Command=threadline.Command,
        interrupt=threadline.interrupt,
    )


def load_langgraph() -> Lib:
    try:
        from langgraph.graph import END, START, StateGraph
        from langgraph.types import Command, Send, interrupt
    except ImportError as exc:  # pragma: no cover - depends on the interpreter
        raise LibraryMissing(
            f"langgraph is not installed here ({exc}); run `make bench` to use bench/.venv-peer"
        ) from exc
    return Lib(
        name="langgraph",
        version=_version("langgraph"),
        StateGraph=StateGraph,
        START=START,
        END=END,
        Send=Send,
        Command=Command,
        interrupt=interrupt,
    )


LOADERS = {"threadline": load_threadline, "langgraph": load_langgraph}
