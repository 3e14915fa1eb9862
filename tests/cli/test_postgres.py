"""``threads list`` on PostgreSQL (in a schema of its own)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from postgres_fixtures import postgres_saver, session_schemas_dropped  # noqa: F401
from services import postgres_url

from threadline.checkpoint import from_url


def test_threads_list_on_postgres(
    cli: Any, flows: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with postgres_saver() as saver:
        graph = flows.approval.compile(checkpointer=saver)
        graph.invoke({"topic": "pg"}, {"configurable": {"thread_id": "pg-1"}})
        opened = functools.partial(from_url, schema=saver.schema)
        monkeypatch.setattr("threadline.cli.context.from_url", opened)
        url = postgres_url()
        rows = cli("threads", "list", "--status", "interrupted", "--db", url, "--json").json()
        assert [(r["thread_id"], r["next"]) for r in rows] == [("pg-1", ["ask"])]
        state = cli("state", "pg-1", "--db", url, "--json").json()
        assert state["interrupts"][0]["value"] == {"question": "ok pg?"}
