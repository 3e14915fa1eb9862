"""resume (--value, --accept, --reject, --interrupt) and fork: the graph from --graph or the
config file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def test_resume_with_a_value_finishes_the_thread(cli: Any, db: str) -> None:
    done = cli("resume", "a", "--value", '"yes"', "-g", "flows.py:approval", "--db", db, "--json")
    state = done.json()
    assert state["status"] == "idle" and state["values"]["answer"] == "yes!"
    assert "yes!" in cli("state", "a", "--db", db).stdout
    # nothing waits any more
    again = cli("resume", "a", "--value", '"no"', "-g", "flows.py:approval", "--db", db, code=4)
    assert "thread 'a' has no interrupt waiting (it is idle)" in again.stderr


def test_resume_input_errors(cli: Any, db: str) -> None:
    bad = cli("resume", "a", "--value", "yes", "-g", "flows.py:approval", "--db", db, code=2)
    assert "--value: not valid JSON" in bad.stderr and "Traceback" not in bad.output
    both = cli("resume", "a", "--value", "1", "--accept", "--db", db, code=2)
    assert "exactly one of --value JSON, --accept, --reject" in both.stderr
    cli("resume", "a", "--db", db, code=2)
    missing = cli("resume", "nope", "--value", "1", "-g", "flows.py:approval", "--db", db, code=3)
    assert "no thread 'nope'" in missing.stderr
    no_graph = cli("resume", "a", "--value", '"yes"', "--db", db, code=2)
    assert "--graph" in no_graph.stderr
    bad_spec = cli("resume", "a", "--value", "1", "-g", "flows.py:nothing", "--db", db, code=2)
    assert "nothing" in bad_spec.stderr
    assert (
        "--message goes with --reject"
        in cli("resume", "r", "--accept", "-m", "x", "--db", db, code=2).stderr
    )


def test_resume_takes_the_graph_from_the_config_file(cli: Any, db: str, tmp_path: Path) -> None:
    (tmp_path / "threadline.toml").write_text('[graphs]\napproval = "flows.py:approval"\n')
    state = cli("resume", "a", "--value", '"ok"', "--db", db, "--json").json()
    assert state["values"]["answer"] == "ok!"


def test_resume_picks_a_config_graph_by_name(cli: Any, db: str, tmp_path: Path) -> None:
    (tmp_path / "threadline.toml").write_text(
        '[graphs]\napproval = "flows.py:approval"\nreviewed = "flows.py:reviewed"\n'
    )
    several = cli("resume", "a", "--value", '"ok"', "--db", db, code=2)
    assert "several" in several.stderr and "--graph NAME" in several.stderr
    unknown = cli("resume", "a", "--value", '"ok"', "-g", "other", "--db", db, code=2)
    assert "'other' is not a graph of the config" in unknown.stderr
    state = cli("resume", "a", "--value", '"ok"', "-g", "approval", "--db", db, "--json").json()
    assert state["values"]["answer"] == "ok!"


def test_accept_and_reject_a_review(cli: Any, db: str, tmp_path: Path, flows: Any) -> None:
    accepted = cli("resume", "r", "--accept", "-g", "flows.py:reviewed", "--db", db, "--json")
    assert accepted.json()["values"]["decision"] == "accept:"
    from threadline.checkpoint import SqliteSaver

    saver = SqliteSaver(str(tmp_path / "app.db"))
    flows.reviewed.compile(checkpointer=saver).invoke({}, {"configurable": {"thread_id": "r2"}})
    saver.close()
    rejected = cli(
        "resume",
        "r2",
        "--reject",
        "-m",
        "too much",
        "-g",
        "flows.py:reviewed",
        "--db",
        db,
        "--json",
    )
    assert rejected.json()["values"]["decision"] == "reject:too much"


def test_accept_and_reject_agent_inbox_requests(cli: Any, tmp_path: Path, flows: Any) -> None:
    from threadline.checkpoint import SqliteSaver

    saver = SqliteSaver(str(tmp_path / "inbox.db"))
    graph = flows.inbox.compile(checkpointer=saver)
    for thread_id in ("i1", "i2", "i3"):
        graph.invoke({}, {"configurable": {"thread_id": thread_id}})
    saver.close()
    db = f"sqlite:///{tmp_path / 'inbox.db'}"
    spec = "flows.py:inbox"
    accepted = cli("resume", "i1", "--accept", "-g", spec, "--db", db, "--json").json()
    assert accepted["values"]["decision"] == "inbox:accept"
    ignored = cli("resume", "i2", "--reject", "-g", spec, "--db", db, "--json").json()
    assert ignored["values"]["decision"] == "inbox:ignore"
    refused = cli("resume", "i3", "--reject", "-m", "no", "-g", spec, "--db", db, code=2)
    assert "carries no message" in refused.stderr


def test_accept_needs_a_review_request(cli: Any, db: str) -> None:
    result = cli("resume", "a", "--accept", "-g", "flows.py:approval", "--db", db, code=2)
    assert "is not a review request" in result.stderr and "--value JSON" in result.stderr


def test_several_interrupts(cli: Any, db: str) -> None:
    two = ("-g", "flows.py:two", "--db", db)
    ambiguous = cli("resume", "t", "--value", '"x"', *two, code=4)
    assert "2 interrupts are waiting" in ambiguous.stderr
    waiting = cli("state", "t", "--db", db, "--json").json()["interrupts"]
    by_node = {i["node"]: i["id"] for i in waiting}
    unknown = cli("resume", "t", "--value", "1", "-i", "zzz", *two, code=3)
    assert "no waiting interrupt 'zzz'" in unknown.stderr
    one = cli("resume", "t", "--value", '"L"', "--interrupt", by_node["left"], *two, "--json")
    assert [i["node"] for i in one.json()["interrupts"]] == ["right"]
    answers = json.dumps({by_node["right"]: "R"})
    rest = cli("resume", "t", "--value", answers, *two, "--json").json()
    assert rest["status"] == "idle" and sorted(rest["values"]["notes"]) == ["left L", "right R"]


def test_fork_from_an_older_checkpoint(cli: Any, db: str) -> None:
    approval = ("-g", "flows.py:approval", "--db", db, "--json")
    cli("resume", "a", "--value", '"yes"', *approval)
    history = cli("history", "a", "--db", db, "--json").json()
    paused = next(r for r in history if r["next"] == ["ask"])["checkpoint_id"]
    changes = '{"topic": "dogs"}'
    forked = cli("fork", "a", "--checkpoint", paused, "--values", changes, *approval).json()
    assert forked["forked_from"] == paused
    assert forked["checkpoint_id"] == forked["fork_checkpoint_id"]
    assert forked["parent_checkpoint_id"] == paused
    assert forked["values"]["topic"] == "dogs" and forked["next"] == ["ask"]
    ran = cli("fork", "a", "-c", paused, "--run", *approval).json()
    assert ran["status"] == "interrupted"
    assert ran["interrupts"][0]["value"] == {"question": "ok cats?"}


def test_fork_errors(cli: Any, db: str) -> None:
    missing = cli("fork", "a", "-c", "nope", "-g", "flows.py:approval", "--db", db, code=3)
    assert "no checkpoint 'nope'" in missing.stderr
    not_object = cli("fork", "a", "-c", "x", "--values", "[1]", "--db", db, code=2)
    assert "--values: give a JSON object" in not_object.stderr
    cli("fork", "a", "--db", db, code=2)  # --checkpoint is required


def test_an_answer_the_schema_refuses_exits_2(cli: Any, db: str) -> None:
    wrong = '{"decisions": [{"type": "maybe"}]}'
    result = cli("resume", "r", "--value", wrong, "-g", "flows.py:reviewed", "--db", db, code=2)
    assert "decisions[0]" in result.stderr and "Traceback" not in result.output
    assert cli("state", "r", "--db", db, "--json").json()["status"] == "interrupted"


def test_a_graph_that_fails_exits_1(cli: Any, db: str) -> None:
    failed = cli("resume", "a", "--value", "5", "-g", "flows.py:approval", "--db", db, code=1)
    assert failed.stderr.startswith("error: ") and "TypeError" in failed.stderr
    assert "Traceback" not in failed.output
    state = cli("state", "a", "--db", db, "--json").json()
    assert state["status"] == "error" and state["errors"][0]["task"] == "finish"
