"""Graph and maintenance commands: ``draw``, ``check``, ``prune``."""

from __future__ import annotations

import dataclasses
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer

from threadline.checkpoint.base import BaseSaver, ThreadInfo
from threadline.cli.context import ConfigOption, DbOption, JsonOption, SchemaOption, open_saver
from threadline.cli.errors import PROBLEMS, USAGE, CliError
from threadline.cli.graphs import named_graph
from threadline.cli.output import note, print_json, table
from threadline.cli.progress import counting_calls
from threadline.cli.threads import Status
from threadline.graph.compiled import CompiledStateGraph
from threadline.graph.state_graph import StateGraph

Spec = Annotated[
    str,
    typer.Argument(help="The graph: file.py:attr, module:attr, or a graph id of the config."),
]
_DURATION = re.compile(r"^(\d+)([dhm])$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}
UNFINISHED = (Status.interrupted, Status.error, Status.running)


def draw(spec: Spec, config: ConfigOption = None, json: JsonOption = False) -> None:
    """Print a graph as a Mermaid flowchart (paste it in a Markdown file or mermaid.live).

    Example: threadline draw app.py:builder > graph.mmd
    """
    drawing = _compiled(named_graph(spec, config)[0], spec).get_graph()
    if json:
        print_json({"nodes": drawing.nodes, "edges": drawing.edges})
        return
    sys.stdout.write(drawing.draw_mermaid())


def check(
    spec: Spec,
    status: Annotated[
        list[Status] | None,
        typer.Option(
            "--status",
            "-s",
            help="Check threads in this status (repeatable).",
            show_default="interrupted, error, running",
        ),
    ] = None,
    config: ConfigOption = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Before a deploy: which unfinished threads this version of the graph cannot continue.

    Exit code 5 when some cannot (a node they plan is gone, a state key changed type...).

    Example: threadline check app.py:builder --db postgresql://app@db/app
    """
    from threadline.server.graphs import bind
    from threadline.thread_check import check as check_threads

    wanted = tuple(s.value for s in status or UNFINISHED)
    with open_saver(db, schema, config) as saver:
        loaded, name = named_graph(spec, config)
        graph = bind(loaded, saver, None, name)
        total = sum(1 for info in saver.list_threads() if info.status in wanted)
        with counting_calls(saver, "get_tuple", total, "checking threads", quiet=json):
            problems = check_threads(graph, saver, statuses=wanted)  # type: ignore[arg-type]
    if json:
        print_json([dataclasses.asdict(p) for p in problems])
    elif problems:
        table(
            f"{len(problems)} problem(s)",
            ["thread", "status", "checkpoint", "problem"],
            ((p.thread_id, p.status, p.checkpoint_id, p.problem) for p in problems),
        )
    else:
        note(f"{total} thread(s) checked: this graph can continue them all")
    if problems:
        raise typer.Exit(PROBLEMS)


def prune(
    before: Annotated[
        str,
        typer.Option(
            "--before",
            help="ISO date/time (UTC unless it says) or an age: 30d, 12h.",
            show_default=False,
        ),
    ],
    keep_last: Annotated[
        int,
        typer.Option(
            "--keep-last",
            min=0,
            help="Keep each thread's newest N checkpoints (0: delete the threads).",
        ),
    ] = 0,
    status: Annotated[
        list[Status] | None,
        typer.Option("--status", "-s", help="Only threads in this status (repeatable)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would go.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Delete threads last updated before a date (or all but their newest checkpoints).

    Examples:

      threadline prune --before 30d --status idle --dry-run

      threadline prune --before 2026-01-01 --keep-last 1 --yes
    """
    from threadline.maintenance import prune as prune_threads

    cutoff = parse_before(before)
    statuses = [s.value for s in status] if status else None
    with open_saver(db, schema) as saver:
        targets = _older(saver, cutoff, statuses)
        if dry_run or not targets:
            _show_targets(targets, json)
            return
        _confirm(len(targets), keep_last, yes or json)
        with counting_calls(saver, "prune", len(targets), "pruning threads", quiet=json):
            done = prune_threads(saver, before=cutoff, keep_last=keep_last, status=statuses)  # type: ignore[arg-type]
    if json:
        print_json({"threads": done.threads, "checkpoints": done.checkpoints})
    else:
        note(f"pruned {len(done.threads)} thread(s), {done.checkpoints} checkpoint(s) deleted")


def parse_before(text: str) -> datetime:
    """``--before``: an age (``30d``, ``12h``, ``90m``) or an ISO date or date-time (UTC when it
    names no zone)."""
    match = _DURATION.match(text.strip())
    if match:
        return datetime.now(UTC) - timedelta(**{_UNITS[match[2]]: int(match[1])})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CliError(
            f"--before: {text!r} is neither an ISO date (2026-01-31, 2026-01-31T12:00+02:00) "
            "nor an age (30d, 12h, 90m)",
            USAGE,
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _compiled(graph: Any, spec: str) -> CompiledStateGraph:
    """A graph to draw: a builder compiled, a factory called."""
    if isinstance(graph, StateGraph):
        return graph.compile()
    if callable(graph) and not isinstance(graph, CompiledStateGraph):
        graph = graph()
    if not isinstance(graph, CompiledStateGraph):
        raise CliError(f"{spec}: a {type(graph).__name__}, not a graph", USAGE)
    return graph


def _older(saver: BaseSaver, before: datetime, statuses: list[str] | None) -> list[ThreadInfo]:
    """The threads ``maintenance.prune`` will touch (for --dry-run and the bar's length)."""

    def updated(info: ThreadInfo) -> datetime:
        when = datetime.fromisoformat(info.updated_at)
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)

    return [
        info
        for info in saver.list_threads()
        if (statuses is None or info.status in statuses) and updated(info) < before
    ]


def _show_targets(targets: list[ThreadInfo], json: bool) -> None:
    if json:
        print_json({"threads": [t.thread_id for t in targets], "checkpoints": None})
    elif targets:
        table(
            f"{len(targets)} thread(s) to prune",
            ["thread", "status", "updated"],
            ((t.thread_id, t.status, t.updated_at) for t in targets),
        )
    else:
        note("no thread was last updated before that")


def _confirm(count: int, keep_last: int, yes: bool) -> None:
    """Ask before deleting, when someone is at the terminal to answer."""
    if yes or not sys.stdin.isatty():
        return
    what = (
        f"delete {count} thread(s)"
        if keep_last == 0
        else (f"keep only the newest {keep_last} checkpoint(s) of {count} thread(s)")
    )
    if not typer.confirm(f"{what.capitalize()}?"):
        raise typer.Abort()
