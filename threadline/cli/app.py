"""The ``threadline`` command: its groups, and ``serve`` / ``worker`` (the server's, loaded lazily).

Every command takes ``--db URL`` (or ``THREADLINE_DB``; default ``sqlite:///threadline.db``)
and most take ``--json``. Exit codes: see ``threadline.cli.errors`` and docs/cli.md.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from threadline.cli import ops, runs, threads
from threadline.cli.context import ConfigOption, SchemaOption
from threadline.cli.errors import FAILED, CliError, ErrorsToExitCodes
from threadline.cli.keys import keys_app

EPILOG = """Examples:

  threadline threads list --status interrupted

  threadline state order-1 --json

  threadline resume order-1 --accept

Exit codes: 0 ok, 1 failed, 2 bad usage or input, 3 not found, 4 nothing to resume or a
conflict, 5 check found problems. Docs: docs/cli.md."""

app = typer.Typer(
    name="threadline",
    cls=ErrorsToExitCodes,
    help="Inspect and operate threadline threads; run the server and its workers.",
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
app.add_typer(threads.threads_app, name="threads")
app.add_typer(keys_app, name="keys")
app.command()(threads.state)
app.command()(threads.history)
app.command()(threads.trace)
app.command()(runs.resume)
app.command()(runs.fork)
app.command()(ops.draw)
app.command()(ops.check)
app.command()(ops.prune)

DbOverride = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="THREADLINE_DB",
        help="Saver URL (default: the config's db).",
        show_default=False,
    ),
]


@app.command()
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
    _server_part("threadline.server.app", "serve")(settings)


@app.command()
def worker(config: ConfigOption = None, db: DbOverride = None, schema: SchemaOption = None) -> None:
    """Run a worker: it takes queued runs from PostgreSQL and runs them (any number of them).

    Example: threadline worker --config threadline.toml
    """
    from threadline.server.settings import load_settings

    settings = load_settings(config, db=db, schema=schema)
    _server_part("threadline.server.worker", "run_worker")(settings)


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
