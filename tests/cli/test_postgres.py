"""``threads list``, ``state`` and ``keys`` on PostgreSQL, in a schema of its own (--schema)."""

from __future__ import annotations

from typing import Any

from postgres_fixtures import postgres_saver, session_schemas_dropped  # noqa: F401
from services import postgres_url


def test_threads_and_keys_on_postgres(cli: Any, flows: Any) -> None:
    with postgres_saver() as saver:
        graph = flows.approval.compile(checkpointer=saver)
        graph.invoke({"topic": "pg"}, {"configurable": {"thread_id": "pg-1"}})
        where = ("--db", postgres_url(), "--schema", saver.schema, "--json")
        rows = cli("threads", "list", "--status", "interrupted", *where).json()
        assert [(r["thread_id"], r["next"]) for r in rows] == [("pg-1", ["ask"])]
        state = cli("state", "pg-1", *where).json()
        assert state["interrupts"][0]["value"] == {"question": "ok pg?"}
        key = cli("keys", "create", "--name", "pg-bot", *where).json()
        assert [k["key_id"] for k in cli("keys", "list", *where).json()] == [key["key_id"]]
