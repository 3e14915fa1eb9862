"""Which graph continues a thread (``resume``, ``fork``): ``--graph``, or the config file's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from threadline.checkpoint.base import BaseSaver
from threadline.cli.context import config_here, load_graph
from threadline.cli.errors import USAGE, CliError
from threadline.graph.compiled import CompiledStateGraph
from threadline.store.base import BaseStore


@dataclass(frozen=True)
class ThreadGraph:
    """A graph bound to the command's saver; ``graph_id`` when it is one of the config's (the
    server's id, which runs stamp in their checkpoints' metadata as the server's runs do), and
    then the server's store too."""

    graph: CompiledStateGraph
    graph_id: str | None
    store: BaseStore | None = None

    def close(self) -> None:
        """Close the store this command opened for the graph."""
        _close(self.store)

    def run_config(self, thread_id: str, **configurable: str) -> dict[str, object]:
        """The config of a run on ``thread_id``: its checkpoints name the graph, if known."""
        config: dict[str, object] = {"configurable": {"thread_id": thread_id, **configurable}}
        if self.graph_id is not None:
            config["metadata"] = {"graph_id": self.graph_id}
        return config


def graph_for_thread(
    saver: BaseSaver,
    thread_id: str,
    spec: str | None,
    config: Path | None,
    store_at: tuple[str, str | None],
) -> ThreadGraph:
    """The graph that continues ``thread_id``, saving in ``saver``.

    ``--graph file.py:attr`` wins (a graph of the user's, run without a store, as the library
    runs it). ``--graph NAME`` is a graph id of the config file. Without it: the config's
    graph whose id the server stored in the thread's checkpoint metadata (``graph_id``, the
    newest checkpoint that has one), or the config's only graph. A config graph gets the store
    the server gives it, beside the checkpoints at ``store_at`` (URL, schema).
    """
    from threadline.server.graphs import bind

    if spec is not None and ":" in spec:
        return ThreadGraph(bind(load_graph(spec), saver, None, spec.rpartition(":")[2]), None)
    graphs, base_dir = _config_graphs(config)
    stored = None if spec else _stored_graph_id(saver, thread_id)
    graph_id = spec or stored
    if graph_id is None and len(graphs) == 1:
        graph_id = next(iter(graphs))
    if graph_id is None:
        raise CliError(
            f"thread {thread_id!r} names no graph and the config has several "
            f"({', '.join(graphs)}): pass --graph NAME",
            USAGE,
        )
    if graph_id not in graphs:
        whose = (
            f"thread {thread_id!r} was run by graph {graph_id!r}, which"
            if stored
            else (f"--graph: {graph_id!r}")
        )
        raise CliError(
            f"{whose} is not a graph of the config ({', '.join(graphs)}); "
            "pass --graph NAME or --graph file.py:attr",
            USAGE,
        )
    from threadline.server.services import store_from_url

    loaded = load_graph(graphs[graph_id], base_dir)
    url, schema = store_at
    store = store_from_url(url, schema or "public")
    try:
        return ThreadGraph(bind(loaded, saver, store, graph_id), graph_id, store)
    except BaseException:
        _close(store)
        raise


def named_graph(spec: str, config: Path | None = None) -> tuple[object, str]:
    """What ``spec`` names, and a name for it: ``file.py:attr``/``module:attr``, or a graph id
    of the config file (``draw``, ``check``)."""
    if ":" in spec:
        return load_graph(spec), spec.rpartition(":")[2]
    graphs, base_dir = _config_graphs(config, "write it as file.py:attr")
    if spec not in graphs:
        raise CliError(
            f"{spec!r} is not a graph of the config ({', '.join(graphs)}); "
            "write file.py:attr or module:attr, or a graph id of the config",
            USAGE,
        )
    return load_graph(graphs[spec], base_dir), spec


def _config_graphs(
    config: Path | None, how: str = "pass --graph file.py:attr"
) -> tuple[dict[str, str], Path]:
    """The config file's graphs and their folder; ``how`` says how to name a graph without."""
    from threadline.server.settings import CONFIG_NAMES, load_settings

    if config is None and config_here() is None:
        raise CliError(
            f"which graph? {how}, or run this where {CONFIG_NAMES[0]} is (or pass --config "
            "PATH) to use its graphs",
            USAGE,
        )
    settings = load_settings(config)
    return dict(settings.graphs), settings.base_dir


def _stored_graph_id(saver: BaseSaver, thread_id: str) -> str | None:
    """The ``graph_id`` of the thread's newest checkpoint that has one (a run made outside
    the server, by the library, may have left newer checkpoints without it)."""
    for record in saver.list(thread_id):
        graph_id = record.metadata.get("graph_id")
        if isinstance(graph_id, str):
            return graph_id
    return None


def _close(store: BaseStore | None) -> None:
    close = getattr(store, "close", None)  # BaseStore has no close(); the SQL stores do
    if close is not None:
        close()
