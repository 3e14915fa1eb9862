"""Error messages a newcomer meets first: each names what is wrong and how to fix it."""

from __future__ import annotations

import importlib
import sys
from typing import TypedDict

import pytest

from threadline import START, StateGraph
from threadline.errors import ConfigError, NothingToResumeError


class State(TypedDict):
    x: int


def graph():
    g = StateGraph(State)
    g.add_node("a", lambda s: {"x": 1})
    g.add_edge(START, "a")
    return g.compile()


def hide(monkeypatch: pytest.MonkeyPatch, driver: str) -> None:
    """Make ``driver`` look not installed, with the modules that import it not loaded yet."""
    users = ("threadline.checkpoint.postgres", "threadline.checkpoint.redis")
    users += ("threadline.store.postgres", "threadline.store.redis")
    for module in [m for m in sys.modules if m.startswith((*users, driver))]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, driver, None)


def test_invoke_none_without_a_checkpointer_names_the_thread_and_the_fix():
    with pytest.raises(NothingToResumeError, match=r"\('x'\), but this graph has no checkpointer"):
        graph().invoke(None, {"configurable": {"thread_id": "x"}})


def test_a_config_that_is_not_a_dict_is_named():
    with pytest.raises(ConfigError, match=r"config must be a dict .* got str 'a'"):
        graph().invoke({"x": 0}, "a")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("package", "name", "driver", "extra"),
    [
        ("threadline.checkpoint", "PostgresSaver", "psycopg", "postgres"),
        ("threadline.checkpoint", "RedisSaver", "redis", "redis"),
        ("threadline.store", "PostgresStore", "psycopg", "postgres"),
    ],
)
def test_a_missing_driver_names_the_install_command(monkeypatch, package, name, driver, extra):
    hide(monkeypatch, driver)
    parent = importlib.import_module(package)
    with pytest.raises(ModuleNotFoundError, match=rf"pip install 'threadline\[{extra}\]'"):
        getattr(parent, name)


def test_from_url_names_the_install_command(monkeypatch):
    from threadline.checkpoint import from_url

    hide(monkeypatch, "redis")
    with pytest.raises(ModuleNotFoundError, match=r"threadline\[redis\]"):
        from_url("redis://127.0.0.1:6379")
