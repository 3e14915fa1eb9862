"""``threadline serve`` and ``threadline worker``: the server's, imported only when run (the
server's dependencies are an optional extra).

Before starting, the settings are tried here (the db URL opens, every graph of the config
loads), so that a mistake is one line naming it with exit code 2, not a traceback from the
server's startup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from threadline.cli.context import ConfigOption, SchemaOption, is_postgres
from threadline.cli.errors import FAILED, CliError

if TYPE_CHECKING:
    from threadline.server.settings import ServerSettings

DbOverride = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="THREADLINE_DB",
        help="Saver URL (default: the config's db).",
        show_default=False,
    ),
]


def serve(
    config: ConfigOption = None,
    host: Annotated[
        str | None,
        typer.Option(help="Address to listen on (default 127.0.0.1).", show_default=False),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port (default 2024).", show_default=False)
    ] = None,
    db: DbOverride = None,
    schema: SchemaOption = None,
) -> None:
    """Run the HTTP server (LangGraph Server's API) for the graphs of the config file.

    With SQLite it also runs the runs itself; with PostgreSQL and queue = "procrastinate",
    start `threadline worker` processes too.

    Example: threadline serve --config threadline.toml --port 8123
    """
    from threadline.server.settings import load_settings

    settings = load_settings(config, host=host, port=port, db=db, schema=schema)
    start = _server_part("threadline.server.app", "serve")
    _preflight(settings)
    _started(start, settings)


def worker(config: ConfigOption = None, db: DbOverride = None, schema: SchemaOption = None) -> None:
    """Run a worker: it takes queued runs from PostgreSQL and runs them (any number of them).

    Example: threadline worker --config threadline.toml
    """
    from threadline.server.settings import load_settings

    settings = load_settings(config, db=db, schema=schema)
    start = _server_part("threadline.server.worker", "run_worker")
    _preflight(settings)
    _started(start, settings)


def _server_part(module: str, name: str) -> Any:
    """``module.name``, imported only now: the server's dependencies are an optional extra."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        extra = "workers" if name == "run_worker" else "server"
        raise CliError(
            f"the server cannot start: {exc}; install it with pip install 'threadline[{extra}]'",
            FAILED,
        ) from None
    except AttributeError:
        raise CliError(f"{module} has no {name}() in this version of threadline", FAILED) from None


def _preflight(settings: ServerSettings) -> None:
    """Open the db and load every graph, as the server will at startup."""
    from threadline.checkpoint import from_url
    from threadline.server.graphs import load_object

    schema = getattr(settings, "schema", None)
    options = {"schema": schema} if schema and is_postgres(settings.db) else {}
    from_url(settings.db, **options).close()
    for spec in settings.graphs.values():
        load_object(spec, settings.base_dir)


def _started(start: Any, settings: ServerSettings) -> None:
    """Run ``start(settings)``; a server that exits non-zero (uvicorn exits 3 when its startup
    fails) is exit code 1 here, as 3 means "not found" to this command."""
    try:
        start(settings)
    except SystemExit as exc:
        if exc.code not in (0, None):
            message = f"the server exited with code {exc.code} (its log above says why)"
            raise CliError(message, FAILED) from None
