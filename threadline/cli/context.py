"""Where a command's saver and graph come from: ``--db``/``THREADLINE_DB``, ``--graph``, the
server's config file.

The saver's URL: ``--db`` (or ``THREADLINE_DB``); else the ``db`` of the config file
(``--config``, or ``threadline.toml``/``threadline.json``/``langgraph.json`` in this folder),
so that the CLI reads the server's threads and keys; else ``sqlite:///threadline.db``. A
PostgreSQL schema likewise: ``--schema`` (``THREADLINE_SCHEMA``), the config's, ``public``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote, urlsplit

import typer

from threadline.checkpoint import from_url
from threadline.checkpoint.base import BaseSaver, CheckpointRecord
from threadline.cli.errors import NOT_FOUND, USAGE, CliError

DEFAULT_DB = "sqlite:///threadline.db"

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="THREADLINE_DB",
        help="Saver URL: sqlite:///file.db, file:///dir, postgresql://..., redis://... "
        f"(default: the config file's db, else {DEFAULT_DB})",
        show_default=False,
    ),
]
SchemaOption = Annotated[
    str | None,
    typer.Option(
        "--schema",
        envvar="THREADLINE_SCHEMA",
        help="PostgreSQL schema (default: the config file's, else public).",
        show_default=False,
    ),
]
ThreadId = Annotated[
    str, typer.Argument(help="The thread id.", metavar="THREAD_ID", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
GraphOption = Annotated[
    str | None,
    typer.Option(
        "--graph",
        "-g",
        help="The graph: file.py:attr, module:attr, or a graph id of the config file "
        "(default: the thread's graph in the config file).",
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="threadline.toml / threadline.json / langgraph.json (default: the one in this "
        "folder).",
    ),
]


def resolve_db(
    db: str | None, schema: str | None, config: Path | None = None
) -> tuple[str, str | None]:
    """The saver URL and PostgreSQL schema a command uses (see the module's docstring)."""
    if db is not None:
        return db, schema
    file = config if config is not None else config_here()
    if file is None:
        return DEFAULT_DB, schema
    from threadline.server.settings import load_settings

    settings = load_settings(file)
    return settings.db, schema or getattr(settings, "schema", None)


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme.lower() in ("postgres", "postgresql")


@contextmanager
def open_saver(
    db: str | None, schema: str | None = None, config: Path | None = None
) -> Iterator[BaseSaver]:
    """The saver of ``db`` (resolved by ``resolve_db``), closed when the command ends.

    A SQLite file or a files folder that does not exist is an error rather than a new empty
    store: a typo in ``--db`` (or running in the wrong folder) should not look like "no
    threads".
    """
    url, schema = resolve_db(db, schema, config)
    check_local_store(url)
    options = {"schema": schema} if schema and is_postgres(url) else {}
    try:
        saver = from_url(url, **options)
    except ModuleNotFoundError as exc:
        raise CliError(
            f"--db {url}: this saver needs {exc.name!r}; install its extra", USAGE
        ) from None
    try:
        yield saver
    finally:
        saver.close()


def config_here() -> Path | None:
    """The server's config file in the current folder, if there is one."""
    from threadline.server.settings import CONFIG_NAMES

    found = [Path.cwd() / name for name in CONFIG_NAMES if (Path.cwd() / name).is_file()]
    return found[0] if found else None


def check_local_store(url: str) -> None:
    """``CliError`` (not found) when ``url`` names a SQLite file or folder that is not there."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "file":
        where, what = Path(unquote(urlsplit(url).path)), "folder"
        exists = where.is_dir()
    elif scheme == "sqlite":
        rest = url.split("://", 1)[1]
        if rest in ("", ":memory:", "/:memory:") or not rest.startswith("/"):
            return  # in memory, or a malformed URL that from_url names precisely
        where, what = Path(unquote(rest[1:])), "SQLite file"
        exists = where.is_file()
    else:
        return
    if not exists:
        raise CliError(
            f"--db {url}: there is no {what} {where.resolve()}; pass --db URL or set THREADLINE_DB",
            NOT_FOUND,
        )


def newest(saver: BaseSaver, thread_id: str, checkpoint_id: str | None = None) -> CheckpointRecord:
    """The thread's newest checkpoint (or ``checkpoint_id``); ``CliError`` naming what is
    missing."""
    record = saver.get_tuple(thread_id, "", checkpoint_id)
    if record is not None:
        return record
    if checkpoint_id is not None and saver.get_tuple(thread_id) is not None:
        raise CliError(f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}", NOT_FOUND)
    raise CliError(f"no thread {thread_id!r} in this saver", NOT_FOUND)


def load_graph(spec: str, base_dir: Path | None = None) -> Any:
    """What ``spec`` (``file.py:attr`` or ``module:attr``) names: a builder, a compiled graph
    or a factory."""
    from threadline.server.graphs import load_object

    return load_object(spec, base_dir or Path.cwd())
