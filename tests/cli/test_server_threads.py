"""Threads the server ran: their graph found by the ``graph_id`` its runs stamp, and its
records row kept true after the CLI moves them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from threadline.checkpoint import SqliteSaver
from threadline.server import records
from threadline.server.db import Database

CONFIG = '[graphs]\napproval = "flows.py:approval"\nreviewed = "flows.py:reviewed"\n'


def served(tmp_path: Path, flows: Any, graph_id: str, thread_id: str, start: Any) -> str:
    """A thread run as the server runs it: its row in tl_threads, graph_id in its metadata."""
    url = f"sqlite:///{tmp_path / 'threadline.db'}"
    db = Database(url)
    db.do(lambda tx: records.create_thread(tx, "", thread_id, {"graph_id": graph_id}))
    db.do(lambda tx: records.set_thread_status(tx, thread_id, "interrupted"))
    db.close()
    saver = SqliteSaver(str(tmp_path / "threadline.db"))
    config = {"configurable": {"thread_id": thread_id}, "metadata": {"graph_id": graph_id}}
    getattr(flows, graph_id).compile(checkpointer=saver).invoke(start, config)
    saver.close()
    return url


def row(url: str, thread_id: str) -> dict[str, Any]:
    db = Database(url)
    try:
        found = db.do(lambda tx: records.get_thread(tx, "", thread_id))
    finally:
        db.close()
    assert found is not None
    return found


def test_the_graph_the_server_ran_and_its_row(cli: Any, flows: Any, tmp_path: Path) -> None:
    (tmp_path / "threadline.toml").write_text(CONFIG)
    url = served(tmp_path, flows, "reviewed", "s1", {})
    state = cli("resume", "s1", "--accept", "--json").json()  # the config's db and graph
    assert state["values"]["decision"] == "accept:"
    assert state["metadata"]["graph_id"] == "reviewed"  # stamped as the server stamps it
    assert row(url, "s1")["status"] == "idle"
    assert row(url, "s1")["values"]["decision"] == "accept:"


def test_a_forked_thread_keeps_its_graph(cli: Any, flows: Any, tmp_path: Path) -> None:
    (tmp_path / "threadline.toml").write_text(CONFIG)
    url = served(tmp_path, flows, "approval", "s2", {"topic": "cats"})
    first = cli("history", "s2", "--json").json()[-1]["checkpoint_id"]
    forked = cli("fork", "s2", "-c", first, "--values", '{"topic": "dogs"}', "--run", "--json")
    assert forked.json()["interrupts"][0]["value"] == {"question": "ok dogs?"}
    assert row(url, "s2")["status"] == "interrupted"
    assert row(url, "s2")["values"]["topic"] == "dogs"
    # the fork's own checkpoint names no graph; an older one does
    assert cli("resume", "s2", "--value", '"y"', "--json").json()["values"]["answer"] == "y!"


def test_a_graph_id_the_config_lacks(cli: Any, flows: Any, tmp_path: Path) -> None:
    (tmp_path / "threadline.toml").write_text('[graphs]\nother = "flows.py:approval"\n')
    served(tmp_path, flows, "reviewed", "s3", {})
    result = cli("resume", "s3", "--accept", code=2)
    assert "thread 's3' was run by graph 'reviewed', which is not a graph" in result.stderr


def test_a_config_graph_gets_the_servers_store(cli: Any, flows: Any, tmp_path: Path) -> None:
    (tmp_path / "threadline.toml").write_text('[graphs]\nmemory = "flows.py:memory"\n')
    served(tmp_path, flows, "memory", "s4", {})
    assert cli("resume", "s4", "--value", '"milk"', "--json").json()["values"]["answer"] == "milk"
    from threadline.store.sqlite import SqliteStore

    store = SqliteStore(str(tmp_path / "threadline.db"))
    try:
        item = store.get(("notes",), "last")
        assert item is not None and item.value == {"text": "milk"}  # where the server looks
    finally:
        store.close()
