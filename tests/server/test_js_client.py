"""The server driven by LangGraph's JavaScript client (``@langchain/langgraph-sdk`` from npm).

``js/interop.mjs`` runs each scenario against the server and prints what it saw as JSON; this
test checks it. The client is installed into ``js/node_modules`` with ``npm ci`` (from the
committed lock file) when it is missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import HERE, RunningServer

JS = HERE / "js"


def _installed() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed to test the JavaScript client")
    if not (JS / "node_modules" / "@langchain" / "langgraph-sdk").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, timeout=300)
    return Path(node)


@pytest.fixture
def seen(served: RunningServer) -> dict[str, Any]:
    node = _installed()
    done = subprocess.run(
        [str(node), "interop.mjs", served.url],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_langgraphs_javascript_client_works_unchanged(seen: dict[str, Any]) -> None:
    steps = {name: value for name, value in seen.items() if isinstance(value, dict)}
    failed = {n: v for n, v in steps.items() if "thrown" in v}
    assert not failed

    assert seen["assistants"] == {"found": ["counter"], "same": True}

    threads = seen["threads"]
    assert threads["waited"] == {"n": 3, "steps": [2, 3]}
    assert threads["searched"] == [True]
    assert threads["state"] == threads["historyFirst"] == {"n": 3, "steps": [2, 3]}
    assert threads["historyLength"] == 2
    assert threads["updatedCheckpoint"] is True
    assert threads["after"] == {"values": {"n": 0, "steps": [2, 3]}, "next": ["tick"]}

    values = seen["stream_values"]
    assert values[0]["event"] == "metadata" and values[0]["data"]["run_id"]
    assert [p["data"]["n"] for p in values[1:]] == [1, 2, 3]
    assert [p["data"] for p in seen["stream_updates"][1:]] == [
        {"tick": {"n": 2, "steps": [2]}},
        {"tick": {"n": 3, "steps": [3]}},
    ]
    tokens = [p["data"] for p in seen["stream_messages-tuple"] if p["event"] == "messages"]
    assert len(tokens) > 1
    assert "".join(chunk["content"] for chunk, _ in tokens) == "you said hi js"
    assert {meta["langgraph_node"] for _, meta in tokens} == {"chatbot"}
    assert [p for p in seen["stream_custom"] if p["event"] == "custom"] == [
        {"event": "custom", "data": {"acting_on": "yes"}}
    ]

    hitl = seen["interrupt"]
    assert hitl["asked"][0]["value"] == {"question": "approve refund?"}
    assert hitl["status"] == "interrupted"
    assert hitl["done"]["log"] == ["reviewed: approved", "acted: approved"]

    assert seen["background"] == {"joined": {"n": 3, "steps": [1, 2, 3]}, "status": "success"}
    rejoined = seen["joinStream"]
    assert [p["event"] for p in rejoined["all"]] == ["metadata", "values", "values", "values"]
    assert [p["data"]["n"] for p in rejoined["all"][1:]] == [1, 2, 3]
    # after the first values event's id: only the two later ones
    assert [p["data"]["n"] for p in rejoined["later"] if p["event"] == "values"] == [2, 3]
    assert seen["cancel"]["status"] == "interrupted"
    assert 1 <= seen["cancel"]["n"] < 3  # the work done before the cancel is kept
    assert seen["store"] == {
        "value": {"value": "dark"},
        "namespace": ["js", "prefs"],
        "found": ["theme"],
    }

    errors = seen["errors"]
    assert {name: e["status"] for name, e in errors.items()} == {
        "missingThread": 404,
        "missingAssistant": 404,
        "conflict": 409,
        "invalid": 422,
    }
    assert "status" in errors["invalid"]["message"]
