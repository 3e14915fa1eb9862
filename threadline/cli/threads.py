"""Reading threads: ``threads list``, ``threads show``, ``state``, ``history``, ``trace``.

These need only the saver: they work on threads of any graph, without importing it.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from typing import Annotated, Any

import typer

from threadline.cli.context import DbOption, JsonOption, SchemaOption, ThreadId, newest, open_saver
from threadline.cli.output import fields, interrupts_table, note, print_json, print_state, table
from threadline.cli.records import history_row, state_out, trace_of

threads_app = typer.Typer(
    help="List and show threads.",
    no_args_is_help=True,
    epilog="Example: threadline threads list --status interrupted --db sqlite:///app.db",
)


class Status(StrEnum):
    idle = "idle"
    interrupted = "interrupted"
    error = "error"
    running = "running"


@threads_app.command("list")
def list_threads(
    status: Annotated[
        Status | None, typer.Option("--status", "-s", help="Only threads in this status.")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many.")] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Threads, most recently updated first.

    Example: threadline threads list --status interrupted
    """
    with open_saver(db, schema) as saver:
        threads = saver.list_threads(status=status.value if status else None, limit=limit)
    if json:
        print_json([dataclasses.asdict(info) for info in threads])
        return
    if not threads:
        note("no threads" + (f" with status {status.value}" if status else ""))
        return
    table(
        f"{len(threads)} thread(s)",
        ["thread", "status", "next", "updated", "checkpoint"],
        (
            (i.thread_id, i.status, ", ".join(i.next), i.updated_at, i.checkpoint_id)
            for i in threads
        ),
    )


@threads_app.command("show")
def show_thread(
    thread_id: ThreadId,
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """A thread: its status, newest checkpoint, what it waits for.

    Example: threadline threads show order-1
    """
    with open_saver(db, schema) as saver:
        record = newest(saver, thread_id)
        count = sum(1 for _ in saver.list(thread_id))
    shown = state_out(record)
    summary = {
        key: shown[key]
        for key in ("thread_id", "status", "next", "checkpoint_id", "step", "created_at")
    }
    summary |= {"checkpoints": count, "interrupts": shown["interrupts"], "errors": shown["errors"]}
    if json:
        print_json(summary)
        return
    fields(f"thread {thread_id}", _without_lists(summary))
    interrupts_table(shown["interrupts"])


def state(
    thread_id: ThreadId,
    checkpoint: Annotated[
        str | None, typer.Option("--checkpoint", "-c", help="This checkpoint, not the newest.")
    ] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """The state values of a thread's newest checkpoint (or --checkpoint CID).

    Example: threadline state order-1 --json | jq .values
    """
    with open_saver(db, schema) as saver:
        shown = state_out(newest(saver, thread_id, checkpoint))
    print_state(shown, json)


def history(
    thread_id: ThreadId,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many.")] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """A thread's checkpoints, newest first (every branch).

    Example: threadline history order-1 --limit 10
    """
    with open_saver(db, schema) as saver:
        newest(saver, thread_id)
        rows = [history_row(r) for r in saver.list(thread_id, limit=limit)]
    if json:
        print_json(rows)
        return
    table(
        f"history of {thread_id}",
        ["checkpoint", "step", "source", "next", "created", "parent"],
        (
            (
                r["checkpoint_id"],
                r["step"],
                r["source"],
                ", ".join(r["next"]),
                r["created_at"],
                r["parent_checkpoint_id"],
            )
            for r in rows
        ),
    )


def trace(
    thread_id: ThreadId,
    since: Annotated[
        str | None, typer.Option(help="Only entries after this entry id.", show_default=False)
    ] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """A thread's execution trace: each node attempt, interrupt, answer and event.

    Example: threadline trace order-1 --json
    """
    with open_saver(db, schema) as saver:
        newest(saver, thread_id)
        entries = trace_of(saver, thread_id, since)
    if json:
        print_json([dataclasses.asdict(e) for e in entries])
        return
    table(
        f"trace of {thread_id}",
        ["at", "kind", "name", "status", "attempt", "seconds", "error / data"],
        (
            (
                e.at,
                e.kind,
                e.name,
                e.status,
                e.attempt,
                _seconds(e.duration),
                _error_or_data(e.error_type, e.error_message, e.data),
            )
            for e in entries
        ),
    )


def _without_lists(shown: dict[str, Any]) -> list[tuple[str, Any]]:
    """The one-line fields of a record (its lists and maps get tables of their own)."""
    skip = ("values", "interrupts", "errors")
    return [(k, ", ".join(v) if k == "next" else v) for k, v in shown.items() if k not in skip]


def _seconds(duration: float | None) -> str | None:
    return None if duration is None else f"{duration:.3f}"


def _error_or_data(error_type: str | None, message: str | None, data: Any) -> Any:
    if error_type is not None:
        return f"{error_type}: {message}"
    return data
