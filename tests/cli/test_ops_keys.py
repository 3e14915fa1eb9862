"""draw, check, prune, keys, and serve/worker up to the point where a server would start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from threadline.checkpoint import SqliteSaver
from threadline.cli.ops import parse_before
from threadline.cli.progress import counting_calls


def test_draw(cli: Any) -> None:
    mermaid = cli("draw", "flows.py:approval").stdout
    assert "graph TD;" in mermaid and "ask --> finish;" in mermaid
    shown = cli("draw", "flows.py:approval", "--json").json()
    assert shown["nodes"] == ["__start__", "ask", "finish", "__end__"]
    assert {"source": "ask", "target": "finish", "conditional": False, "label": None} in shown[
        "edges"
    ]
    assert "no attribute 'nothing'" in cli("draw", "flows.py:nothing", code=2).stderr
    assert "does not exist" in cli("draw", "missing.py:graph", code=2).stderr
    assert "SOURCE" not in cli("draw", "flows.py:State", code=2).stderr


def test_check(cli: Any, tmp_path: Path, flows: Any) -> None:
    saver = SqliteSaver(str(tmp_path / "one.db"))
    flows.approval.compile(checkpointer=saver).invoke(
        {"topic": "cats"}, {"configurable": {"thread_id": "a"}}
    )
    saver.close()
    db = f"sqlite:///{tmp_path / 'one.db'}"
    ok = cli("check", "flows.py:approval", "--db", db)
    assert "1 thread(s) checked: this graph can continue them all" in ok.stdout
    assert cli("check", "flows.py:approval", "-s", "idle", "--db", db, "--json").json() == []
    problems = cli("check", "flows.py:two", "--db", db, "--json", code=5).json()
    assert [(p["thread_id"], p["problem"]) for p in problems] == [
        ("a", "plans node 'ask', which this graph does not have")
    ]
    assert "plans node 'ask'" in cli("check", "flows.py:two", "--db", db, code=5).stdout


def test_prune(cli: Any, db: str, tmp_path: Path) -> None:
    dry = cli("prune", "--before", "1h", "--db", db, "--json").json()
    assert dry["threads"] == []
    listed = cli(
        "prune", "--before", "2999-01-01", "--status", "interrupted", "--dry-run", "--db", db
    )
    assert "3 thread(s) to prune" in listed.stdout
    kept = cli("prune", "--before", "2999-01-01", "--keep-last", "1", "--db", db, "--json").json()
    assert sorted(kept["threads"]) == ["a", "r", "t"] and kept["checkpoints"] == 3
    assert len(cli("threads", "list", "--db", db, "--json").json()) == 3
    gone = cli("prune", "--before", "2999-01-01", "-s", "interrupted", "-y", "--db", db)
    assert "pruned 3 thread(s)" in gone.stdout
    assert cli("threads", "list", "--db", db, "--json").json() == []
    bad = cli("prune", "--before", "last week", "--db", db, code=2)
    assert "--before: 'last week'" in bad.stderr


def test_parse_before() -> None:
    assert parse_before("2026-01-31") == datetime(2026, 1, 31, tzinfo=UTC)
    assert parse_before("2026-01-31T12:00+02:00").utcoffset() == timedelta(hours=2)
    age = datetime.now(UTC) - parse_before("30d")
    assert abs(age - timedelta(days=30)) < timedelta(minutes=1)


def test_progress_bar_counts_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    saver = SqliteSaver(str(tmp_path / "p.db"))
    with counting_calls(saver, "list_threads", 2, "listing"):
        assert saver.list_threads() == []
        assert "list_threads" in vars(saver)
    assert "list_threads" not in vars(saver)  # the class's method again
    saver.close()


def test_keys(cli: Any, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'records.db'}"
    created = cli("keys", "create", "ci-bot", "--db", db, "--json").json()
    assert created["secret"].startswith(f"tl_{created['key_id']}_")
    shown = cli("keys", "create", "--name", "ops", "--scope", "team", "--db", db).stdout
    assert "cannot be shown again" in shown and "team" in shown
    keys = cli("keys", "list", "--db", db, "--json").json()
    assert [k["name"] for k in keys] == ["ci-bot", "ops"] and "secret" not in keys[0]
    assert (
        f"key {created['key_id']} revoked"
        in cli("keys", "revoke", created["key_id"], "--db", db).stdout
    )
    again = cli("keys", "revoke", created["key_id"], "--db", db, code=3)
    assert "no live key" in again.stderr
    assert cli("keys", "list", "--db", db, "--json").json()[0]["revoked_at"] is not None
    assert "redis" in cli("keys", "list", "--db", "redis://127.0.0.1:1/0", code=2).stderr
    assert "one name" in cli("keys", "create", "--db", db, code=2).stderr
    assert "one name" in cli("keys", "create", "a", "--name", "b", "--db", db, code=2).stderr


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_serve_and_worker_need_a_config(cli: Any, tmp_path: Path, command: str) -> None:
    assert "--config" in cli(command, "--help").stdout
    missing = cli(command, code=2)
    assert "threadline.toml" in missing.stderr and "--config" in missing.stderr
    (tmp_path / "threadline.toml").write_text("[graphs]\n")
    assert "no graphs" in cli(command, code=2).stderr
    (tmp_path / "threadline.toml").write_text('[graphs]\na = "flows.py:approval"\n[server]\nx=1\n')
    assert "unknown [server] keys ['x']" in cli(command, code=2).stderr


def test_draw_and_check_a_graph_of_the_config(cli: Any, db: str, tmp_path: Path) -> None:
    no_config = cli("draw", "approval", code=2)
    assert "which graph? write it as file.py:attr" in no_config.stderr
    (tmp_path / "threadline.toml").write_text('[graphs]\napproval = "flows.py:approval"\n')
    assert "ask --> finish;" in cli("draw", "approval").stdout
    assert "'other' is not a graph of the config" in cli("draw", "other", code=2).stderr
    problems = cli("check", "approval", "--db", db, "--json", code=5).json()
    assert {p["thread_id"] for p in problems} == {"r", "t"}  # the other graphs' threads


def test_serve_says_what_would_fail_at_startup(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "threadline.toml").write_text('[graphs]\na = "flows.py:approval"\n')
    bad_db = cli("serve", "--db", "bogus://x", code=2)
    assert "bogus://x" in bad_db.stderr and "Traceback" not in bad_db.output
    (tmp_path / "threadline.toml").write_text('[graphs]\na = "flows.py:nothing"\n')
    assert "no attribute 'nothing'" in cli("serve", code=2).stderr


def test_a_server_that_exits_3_is_exit_1_here() -> None:
    from threadline.cli.errors import CliError
    from threadline.cli.serving import _started

    def start(settings: Any) -> None:
        raise SystemExit(3)

    with pytest.raises(CliError) as caught:
        _started(start, None)  # type: ignore[arg-type]
    assert caught.value.code == 1 and "exited with code 3" in str(caught.value)
    _started(lambda settings: None, None)  # type: ignore[arg-type]
