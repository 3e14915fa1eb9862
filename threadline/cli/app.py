"""The ``threadline`` command: its commands and groups, registered in ``--help``'s order.

Every command takes ``--db URL`` (or ``THREADLINE_DB``; default ``sqlite:///threadline.db``)
and most take ``--json``. Exit codes: see ``threadline.cli.errors`` and docs/cli.md.
"""

from __future__ import annotations

import typer

from threadline.cli import ops, runs, serving, threads
from threadline.cli.errors import ErrorsToExitCodes
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
app.command()(serving.serve)
app.command()(serving.worker)
