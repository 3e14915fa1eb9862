"""``threadline keys create/list/revoke``: the server's API keys, kept hashed in its ``--db``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from threadline.cli.context import DEFAULT_DB, DbOption, JsonOption, check_local_store
from threadline.cli.errors import NOT_FOUND, CliError
from threadline.cli.output import fields, note, print_json, table

if TYPE_CHECKING:
    from threadline.server.db import Database

keys_app = typer.Typer(
    help="Create, list and revoke the server's API keys.",
    no_args_is_help=True,
    epilog="Example: threadline keys create ci-bot --db postgresql://app@db/app",
)


@contextmanager
def _records(url: str, *, create: bool = False) -> Iterator[Database]:
    """The server's records database (its tables are made on first use); ``create``: a new
    SQLite file may be made (``keys create`` before the server's first start)."""
    from threadline.server.db import Database

    if not create:
        check_local_store(url)
    db = Database(url)
    try:
        yield db
    finally:
        db.close()


@keys_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="A name to recognise the key by.")],
    scope: Annotated[
        str | None,
        typer.Option(help="Share a scope with other keys (default: a scope of its own)."),
    ] = None,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Create a key. Its secret is printed once: only its hash is kept.

    Example: threadline keys create ci-bot --scope team-a
    """
    from threadline.server.auth import create_key

    with _records(db, create=True) as records:
        info, secret = create_key(records, name, scope)
    if json:
        print_json({**dataclasses.asdict(info), "secret": secret})
        return
    fields(f"key {info.key_id}", [*dataclasses.asdict(info).items(), ("secret", secret)])
    note("Keep the secret now: it cannot be shown again. Send it as the x-api-key header.")


@keys_app.command("list")
def list_keys(db: DbOption = DEFAULT_DB, json: JsonOption = False) -> None:
    """Every key, live and revoked (never their secrets).

    Example: threadline keys list --json
    """
    from threadline.server.auth import list_keys as stored_keys

    with _records(db) as records:
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
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Revoke a key: requests with it are refused from now on.

    Example: threadline keys revoke 3f9a0c12b4d1
    """
    from threadline.server.auth import revoke_key

    with _records(db) as records:
        if not revoke_key(records, key_id):
            raise CliError(f"no live key {key_id!r} (unknown or already revoked)", NOT_FOUND)
    if json:
        print_json({"key_id": key_id, "revoked": True})
        return
    note(f"key {key_id} revoked")
