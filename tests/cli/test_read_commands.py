"""threads list/show, state, history, trace: read from the saver alone, tables and --json."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_threads_list_shows_paused_threads(cli: Any, db: str) -> None:
    out = cli("threads", "list", "--db", db).stdout
    assert "3 thread(s)" in out and "interrupted" in out
    rows = cli("threads", "list", "--status", "interrupted", "--db", db, "--json").json()
    assert sorted(r["thread_id"] for r in rows) == ["a", "r", "t"]
    assert cli("threads", "list", "--status", "idle", "--db", db, "--json").json() == []
    assert "no threads with status idle" in cli("threads", "list", "-s", "idle", "--db", db).stdout


def test_threads_list_limit_and_env(cli: Any, db: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("THREADLINE_DB", db)
    assert len(cli("threads", "list", "--limit", "2", "--json").json()) == 2


def test_threads_show(cli: Any, db: str) -> None:
    shown = cli("threads", "show", "a", "--db", db, "--json").json()
    assert shown["status"] == "interrupted" and shown["next"] == ["ask"]
    assert shown["checkpoints"] == 2
    assert shown["interrupts"][0]["value"] == {"question": "ok cats?"}
    table = cli("threads", "show", "t", "--db", db).stdout
    assert "waiting for an answer" in table and "left?" in table and "right?" in table


def test_state_newest_and_older_checkpoint(cli: Any, db: str) -> None:
    state = cli("state", "a", "--db", db, "--json").json()
    assert state["values"]["topic"] == "cats" and state["status"] == "interrupted"
    older = cli("state", "a", "--checkpoint", state["parent_checkpoint_id"], "--db", db, "--json")
    assert older.json()["next"] == ["__start__"]
    assert "topic" in cli("state", "a", "--db", db).stdout


def test_history_and_trace(cli: Any, db: str) -> None:
    rows = cli("history", "a", "--db", db, "--json").json()
    assert [r["source"] for r in rows] == ["loop", "input"]
    assert "history of a" in cli("history", "a", "--db", db, "--limit", "1").stdout
    entries = cli("trace", "a", "--db", db, "--json").json()
    assert [(e["kind"], e["name"]) for e in entries] == [("node", "ask"), ("interrupt", "ask")]
    assert cli("trace", "a", "--since", entries[0]["id"], "--db", db, "--json").json() == [
        entries[1]
    ]
    assert "interrupted" in cli("trace", "a", "--db", db).stdout


def test_unknown_thread_and_checkpoint_exit_3(cli: Any, db: str) -> None:
    for command in ("state", "history", "trace"):
        result = cli(command, "nope", "--db", db, code=3)
        assert "no thread 'nope'" in result.stderr
    assert "no thread 'nope'" in cli("threads", "show", "nope", "--db", db, code=3).stderr
    result = cli("state", "a", "--checkpoint", "x", "--db", db, code=3)
    assert "thread 'a' has no checkpoint 'x'" in result.stderr


def test_bad_db_urls(cli: Any, tmp_path: Path) -> None:
    result = cli("threads", "list", "--db", "bogus://x", code=2)
    assert "bogus://x" in result.stderr and "Traceback" not in result.output
    missing = cli("threads", "list", code=3)  # the default: ./threadline.db, absent here
    assert "threadline.db" in missing.stderr and "--db" in missing.stderr
    assert not (tmp_path / "threadline.db").exists()
    assert "sqlite:///" in cli("threads", "list", "--db", "sqlite://rel.db", code=2).stderr
    folder = cli("threads", "list", "--db", f"file://{tmp_path / 'none'}", code=3)
    assert "there is no folder" in folder.stderr and not (tmp_path / "none").exists()
    (tmp_path / "threads").mkdir()
    assert "no threads" in cli("threads", "list", "--db", f"file://{tmp_path / 'threads'}").stdout


def test_bad_status_is_a_usage_error(cli: Any, db: str) -> None:
    result = cli("threads", "list", "--status", "paused", "--db", db, code=2)
    assert "--status" in result.output


def test_the_db_of_the_config_file(cli: Any, db: str, tmp_path: Path) -> None:
    (tmp_path / "threadline.toml").write_text(
        '[graphs]\napproval = "flows.py:approval"\n[server]\ndb = "sqlite:///app.db"\n'
    )
    assert len(cli("threads", "list", "--json").json()) == 3  # no --db: the config's
    state = cli("resume", "a", "--value", '"ok"', "--json").json()  # its db and its graph
    assert state["values"]["answer"] == "ok!"
    elsewhere = tmp_path / "conf" / "threadline.toml"
    elsewhere.parent.mkdir()
    elsewhere.write_text('[graphs]\na = "flows.py:approval"\n[server]\ndb = "sqlite:///no.db"\n')
    result = cli("resume", "a", "--value", "1", "--config", str(elsewhere), code=3)
    assert "no.db" in result.stderr


def test_debug_shows_the_traceback(cli: Any, db: str, monkeypatch: Any) -> None:
    assert "Traceback" not in cli("state", "nope", "--db", db, code=3).stderr
    monkeypatch.setenv("THREADLINE_DEBUG", "1")
    assert "Traceback" in cli("state", "nope", "--db", db, code=3).stderr


def test_help_lists_commands_examples_and_exit_codes(cli: Any) -> None:
    usage = cli("--help").stdout
    assert "Exit codes: 0 ok, 1 failed, 2 bad usage" in usage and "resume" in usage
    assert "threadline threads list --status interrupted" in usage
    for command in (["threads", "list"], ["state"], ["resume"], ["fork"], ["prune"], ["check"]):
        assert "Example" in cli(*command, "--help").stdout, command
