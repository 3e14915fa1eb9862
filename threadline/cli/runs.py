"""Commands that run a thread's graph: ``resume`` and ``fork``.

They need the graph as well as the saver: ``--graph file.py:attr`` (or a graph id of the
config file), else the graph the server recorded for the thread (see ``context``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from threadline.checkpoint.base import BaseSaver
from threadline.cli.answers import Verdict, review_answer
from threadline.cli.context import (
    ConfigOption,
    DbOption,
    GraphOption,
    JsonOption,
    SchemaOption,
    ThreadId,
    newest,
    open_saver,
    resolve_db,
)
from threadline.cli.errors import CONFLICT, NOT_FOUND, USAGE, CliError
from threadline.cli.graphs import graph_for_thread
from threadline.cli.output import parse_json, print_state
from threadline.cli.records import state_out
from threadline.cli.server_rows import sync_server_row
from threadline.runtime.answers import pending_interrupts
from threadline.types import Command, Interrupt


def resume(
    thread_id: ThreadId,
    value: Annotated[
        str | None,
        typer.Option(
            "--value",
            help="The answer, as JSON ('\"yes\"', '{\"approved\": true}'); an object of "
            "interrupt id -> answer answers several.",
            show_default=False,
        ),
    ] = None,
    accept: Annotated[
        bool, typer.Option("--accept", help="Accept every action of a review.")
    ] = False,
    reject: Annotated[
        bool, typer.Option("--reject", help="Reject every action of a review.")
    ] = False,
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="With --reject: the reason given.")
    ] = None,
    interrupt: Annotated[
        str | None,
        typer.Option("--interrupt", "-i", help="Answer this interrupt id (when several wait)."),
    ] = None,
    graph: GraphOption = None,
    config: ConfigOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Answer a thread's pending interrupt and run it on until it ends or asks again.

    --value answers the one waiting interrupt (or --interrupt ID); with several waiting, give
    --interrupt or an object of id -> answer. --accept / --reject answer every waiting review
    (or --interrupt ID's).

    Examples:

      threadline resume order-1 --value '"yes"' --graph app.py:builder

      threadline resume order-1 --accept

      threadline resume order-1 --reject -m "wrong amount"
    """
    _one_answer(value, accept, reject, message)
    url, schema = resolve_db(db, schema, config)
    with open_saver(url, schema) as saver:
        waiting = _waiting(saver, thread_id, interrupt)
        answer = _answer(value, "accept" if accept else "reject", message, interrupt, waiting)
        bound = graph_for_thread(saver, thread_id, graph, config, (url, schema))
        try:
            bound.graph.invoke(Command(resume=answer), bound.run_config(thread_id))
        finally:  # a run that failed moved the thread too (to "error")
            sync_server_row(url, schema, bound, thread_id)
            bound.close()
        shown = state_out(newest(saver, thread_id))
    print_state(shown, json)


def fork(
    thread_id: ThreadId,
    checkpoint: Annotated[
        str, typer.Option("--checkpoint", "-c", help="The checkpoint to fork from.")
    ],
    values: Annotated[
        str | None,
        typer.Option(
            "--values",
            help="State changes as a JSON object (through the reducers).",
            show_default=False,
        ),
    ] = None,
    as_node: Annotated[
        str | None,
        typer.Option("--as-node", help="Apply --values as if this node wrote them."),
    ] = None,
    run: Annotated[
        bool, typer.Option("--run", help="Then run the thread on from the fork.")
    ] = False,
    graph: GraphOption = None,
    config: ConfigOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Make an older checkpoint the thread's head again (time travel), optionally edited.

    The fork is a new checkpoint whose parent is --checkpoint (update_state on that
    checkpoint); the thread goes on from it at the next run (or now, with --run). The
    checkpoints after --checkpoint stay in history.

    Examples:

      threadline fork order-1 --checkpoint 01a2...

      threadline fork order-1 -c 01a2... --values '{"amount": 10}' --as-node review --run
    """
    changes = parse_json(values, "--values") if values is not None else None
    if changes is not None and not isinstance(changes, dict):
        raise CliError("--values: give a JSON object of state keys", USAGE)
    url, schema = resolve_db(db, schema, config)
    with open_saver(url, schema) as saver:
        newest(saver, thread_id, checkpoint)
        bound = graph_for_thread(saver, thread_id, graph, config, (url, schema))
        try:
            at = bound.run_config(thread_id, checkpoint_id=checkpoint)
            head = bound.graph.update_state(at, changes, as_node=as_node)["configurable"]
            if run:
                at = bound.run_config(thread_id, checkpoint_id=head["checkpoint_id"])
                bound.graph.invoke(None, at)
        finally:
            sync_server_row(url, schema, bound, thread_id)
            bound.close()
        shown = state_out(newest(saver, thread_id))
    shown["forked_from"] = checkpoint
    shown["fork_checkpoint_id"] = head["checkpoint_id"]
    print_state(shown, json)


def _one_answer(value: str | None, accept: bool, reject: bool, message: str | None) -> None:
    """``CliError`` unless exactly one of --value, --accept, --reject is given (and --message
    only with --reject)."""
    if [value is not None, accept, reject].count(True) != 1:
        raise CliError("give exactly one of --value JSON, --accept, --reject", USAGE)
    if message is not None and not reject:
        raise CliError("--message goes with --reject", USAGE)


def _answer(
    value: str | None,
    verdict: Verdict,
    message: str | None,
    interrupt: str | None,
    waiting: list[Interrupt],
) -> Any:
    """What ``Command(resume=...)`` gets: the --value (for --interrupt's id, when given), or
    the review answer of each waiting interrupt by id."""
    if value is not None:
        answer = parse_json(value, "--value")
        return {interrupt: answer} if interrupt else answer
    return {item.id: review_answer(item, verdict, message) for item in waiting}


def _waiting(saver: BaseSaver, thread_id: str, interrupt: str | None) -> list[Interrupt]:
    """The interrupts to answer; ``CliError`` when none waits or ``interrupt`` is not one."""
    record = newest(saver, thread_id)
    waiting = [item for _, item in pending_interrupts(record.pending_writes)]
    if not waiting:
        status = state_out(record)["status"]
        raise CliError(
            f"thread {thread_id!r} has no interrupt waiting (it is {status}): nothing to resume",
            CONFLICT,
        )
    if interrupt is None:
        return waiting
    chosen = [item for item in waiting if item.id == interrupt]
    if not chosen:
        ids = ", ".join(item.id for item in waiting)
        raise CliError(
            f"--interrupt: thread {thread_id!r} has no waiting interrupt {interrupt!r} "
            f"(waiting: {ids})",
            NOT_FOUND,
        )
    return chosen
