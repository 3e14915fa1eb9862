"""``threadline keys create/list/revoke``: the server's API keys, kept hashed in its ``--db``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from threadline.cli.context import (
    DbOption,
    JsonOption,
    SchemaOption,
    check_local_store,
    is_postgres,
    resolve_db,
)
from threadline.cli.errors import NOT_FOUND, USAGE, CliError
from threadline.cli.output import fields, note, print_json, table

if TYPE_CHECKING:
    from threadline.server.db import Database

keys_app = typer.Typer(
    help="Create, list and revoke the server's API keys.",
    no_args_is_help=True,
    epilog="Example: threadline keys create ci-bot --db postgresql://app@db/app",
)


@contextmanager
def _records(db: str | None, schema: str | None, *, create: bool = False) -> Iterator[Database]:
    """The server's records database (its tables are made on first use); ``create``: a new
    SQLite file may be made (``keys create`` before the server's first start)."""
    from threadline.server.db import Database

    url, schema = resolve_db(db, schema)
    if not create:
        check_local_store(url)
    records = Database(url, schema=schema) if schema and is_postgres(url) else Database(url)
    try:
        yield records
    finally:
        records.close()


@keys_app.command("create")
def create(
    name: Annotated[
        str | None, typer.Argument(help="A name to recognise the key by.", show_default=False)
    ] = None,
    name_option: Annotated[
        str | None, typer.Option("--name", help="The name, as an option.", show_default=False)
    ] = None,
    scope: Annotated[
        str | None,
        typer.Option(help="Share a scope with other keys (default: a scope of its own)."),
    ] = None,
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Create a key. Its secret is printed once: only its hash is kept.

    Examples: threadline keys create ci-bot --scope team-a; threadline keys create --name ci
    """
    from threadline.server.auth import create_key

    given = {n for n in (name, name_option) if n is not None}
    if len(given) != 1:
        raise CliError("keys create: give the key one name (NAME or --name NAME)", USAGE)
    with _records(db, schema, create=True) as records:
        info, secret = create_key(records, given.pop(), scope)
    if json:
        print_json({**dataclasses.asdict(info), "secret": secret})
        return
    fields(f"key {info.key_id}", [*dataclasses.asdict(info).items(), ("secret", secret)])
    note("Keep the secret now: it cannot be shown again. Send it as the x-api-key header.")


@keys_app.command("list")
def list_keys(db: DbOption = None, schema: SchemaOption = None, json: JsonOption = False) -> None:
    """Every key, live and revoked (never their secrets).

    Example: threadline keys list --json
    """
    from threadline.server.auth import list_keys as stored_keys

    with _records(db, schema) as records:
        keys = stored_keys(records)
    if json:
        print_json([dataclasses.asdict(k) for k in keys])
        return
    table(
        f"{len(keys)} key(s)",
        ["id", "name", "scope", "created", "revoked"],
        ((k.key_id, k.name, k.scope, k.created_at, k.revoked_at) for k in keys),
    )


@keys_app.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (from keys list).")],
    db: DbOption = None,
    schema: SchemaOption = None,
    json: JsonOption = False,
) -> None:
    """Revoke a key: requests with it are refused from now on.

    Example: threadline keys revoke 3f9a0c12b4d1
    """
    from threadline.server.auth import revoke_key

    with _records(db, schema) as records:
        if not revoke_key(records, key_id):
            raise CliError(f"no live key {key_id!r} (unknown or already revoked)", NOT_FOUND)
    if json:
        print_json({"key_id": key_id, "revoked": True})
        return
    note(f"key {key_id} revoked")
