"""Load the graphs a config file names, and give each the server's saver and store."""

from __future__ import annotations

import copy
import importlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from threadline.checkpoint.base import BaseSaver
from threadline.errors import ConfigError
from threadline.graph.compiled import CompiledStateGraph
from threadline.graph.state_graph import StateGraph
from threadline.store.base import BaseStore


def load_object(spec: str, base_dir: Path) -> Any:
    """The attribute ``spec`` names: ``path/to/file.py:attr`` or ``package.module:attr``."""
    target, _, attribute = spec.rpartition(":")
    if not target or not attribute:
        raise ConfigError(
            f"write a graph as 'file.py:attribute' or 'module:attribute', not {spec!r}"
        )
    module = _import_file(base_dir / target) if target.endswith(".py") else _import_module(target)
    try:
        value = module
        for part in attribute.split("."):
            value = getattr(value, part)
    except AttributeError as exc:
        raise ConfigError(f"{target} has no attribute {attribute!r} (from {spec!r})") from exc
    return value


def _import_file(path: Path) -> Any:
    path = path.resolve()
    if not path.is_file():
        raise ConfigError(f"graph file {path} does not exist")
    name = f"threadline_graph_{abs(hash(str(path)))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has a loader
        raise ConfigError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # its sibling modules import as in `python file.py`
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    return module


def _import_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"cannot import module {name!r}: {exc}") from exc


def bind(
    graph: Any, saver: BaseSaver, store: BaseStore | None, graph_id: str
) -> CompiledStateGraph:
    """A graph that saves in ``saver``: a builder is compiled with it, a compiled graph copied.

    A compiled graph that already has a saver of its own is refused: the server's threads,
    history and runs must all live in one place.
    """
    if isinstance(graph, StateGraph):
        return graph.compile(checkpointer=saver, store=store, name=graph_id)
    if callable(graph) and not isinstance(graph, CompiledStateGraph):
        graph = graph()  # a factory, as langgraph.json allows
    if not isinstance(graph, CompiledStateGraph):
        raise ConfigError(
            f"graph {graph_id!r} is a {type(graph).__name__}; serve a StateGraph, a compiled "
            "graph, an @entrypoint, or a function that returns one"
        )
    if isinstance(graph.checkpointer, BaseSaver):
        raise ConfigError(
            f"graph {graph_id!r} was compiled with a checkpointer of its own; compile it without "
            "one (the server gives it its saver)"
        )
    bound = copy.copy(graph)
    bound.checkpointer = saver
    if store is not None and graph.store is None:
        bound.store = store
    return bound


def load_graphs(
    graphs: Mapping[str, str], base_dir: Path, saver: BaseSaver, store: BaseStore | None
) -> dict[str, CompiledStateGraph]:
    """Every graph of the config, loaded and bound, by graph id."""
    return {
        gid: bind(load_object(spec, base_dir), saver, store, gid) for gid, spec in graphs.items()
    }
