"""What the commands print: rich tables for people, plain JSON (``--json``) for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from threadline.server.wire import jsonable

# Tables go to stdout; without a terminal (a pipe) rich prints them without colour codes
console = Console(soft_wrap=False)
MAX_CELL = 60  # longer values are cut in tables; --json prints them whole


def print_json(data: Any) -> None:
    """``data`` as JSON on stdout: values a graph keeps (messages, models) as their dumps."""
    sys.stdout.write(json.dumps(jsonable(data), indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def short(value: Any, width: int = MAX_CELL) -> str:
    """A value in one table cell: compact JSON, cut to ``width`` characters."""
    text = value if isinstance(value, str) else json.dumps(jsonable(value), ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A table of ``rows``; cells are shown with ``short``."""
    shown = Table(title=title, title_justify="left")
    for column in columns:
        shown.add_column(column, overflow="fold")
    for row in rows:
        shown.add_row(*(short(cell) if cell is not None else "" for cell in row))
    console.print(shown)


def fields(title: str, pairs: Iterable[tuple[str, Any]]) -> None:
    """A two-column table of named values (one record)."""
    shown = Table(title=title, title_justify="left", show_header=False)
    shown.add_column(style="bold")
    shown.add_column(overflow="fold")
    for name, value in pairs:
        shown.add_row(name, short(value, 200) if value is not None else "")
    console.print(shown)


def note(text: str) -> None:
    """A line for people (commands print none under ``--json``: stdout is one JSON document)."""
    console.print(text, highlight=False)


def parse_json(text: str, option: str) -> Any:
    """A JSON option's value; a ``CliError`` naming the option when it is not JSON."""
    from threadline.cli.errors import USAGE, CliError

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{option}: not valid JSON ({exc.msg} at column {exc.colno}): {text!r}; "
            "a string needs quotes, e.g. --value '\"yes\"'",
            USAGE,
        ) from None


def print_state(shown: dict[str, Any], json: bool) -> None:
    """A checkpoint as ``records.state_out`` makes it: one-line fields, then its tables."""
    if json:
        print_json(shown)
        return
    tables = ("values", "interrupts", "errors", "metadata")
    fields(
        f"thread {shown['thread_id']}",
        [(k, ", ".join(v) if k == "next" else v) for k, v in shown.items() if k not in tables],
    )
    if shown.get("values"):
        table("values", ["key", "value"], shown["values"].items())
    interrupts_table(shown.get("interrupts", []))
    if shown.get("errors"):
        table(
            "errors",
            ["task", "type", "message"],
            ((e["task"], e["type"], e["message"]) for e in shown["errors"]),
        )


def interrupts_table(interrupts: list[dict[str, Any]]) -> None:
    """The interrupts waiting for an answer, if any."""
    if interrupts:
        table(
            "waiting for an answer",
            ["interrupt", "node", "question"],
            ((i["id"], i["node"], i["value"]) for i in interrupts),
        )
