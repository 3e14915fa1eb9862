"""Operations on the server's records, each a function of one transaction (``db.Tx``).

Rows hold JSON text; these functions take and return the wire shapes of LangGraph Server's
API (``thread_id``, ``status``, ``metadata``...), so routes only add HTTP around them.
An ``owner`` is the scope of the API key that made a row (``""`` without keys); a row is
visible to its owner only. Assistants made from the config's graphs have owner ``"*"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from threadline.clock import increasing_iso, now_iso
from threadline.server.db import Tx

SYSTEM = "*"
RUN_CHANNEL = "tl_run_events"  # NOTIFY'd with a run id when its events or status change
ACTIVE = ("pending", "running")
THREAD_COLUMNS = (
    "thread_id",
    "created_at",
    "updated_at",
    "metadata",
    "status",
    "values",
    "interrupts",
    "error",
)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """LangGraph's metadata filter: every key given has that exact value (nested maps too)."""
    for key, value in (wanted or {}).items():
        have = metadata.get(key)
        if isinstance(value, Mapping) and isinstance(have, Mapping):
            if not matches(have, value):
                return False
        elif have != value:
            return False
    return True


def page(rows: list[dict[str, Any]], limit: int, offset: int) -> list[dict[str, Any]]:
    return rows[offset : offset + limit]


# ---------------------------------------------------------------- assistants
def assistant_out(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "assistant_id": row["assistant_id"],
        "graph_id": row["graph_id"],
        "config": _loads(row["config"]),
        "context": _loads(row["context"]),
        "metadata": _loads(row["metadata"]),
        "name": row["name"],
        "description": row["description"],
        "version": row["version"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def put_assistant(tx: Tx, owner: str, a: Mapping[str, Any]) -> dict[str, Any]:
    now = now_iso()
    tx.run("DELETE FROM tl_assistants WHERE assistant_id = ?", a["assistant_id"])
    tx.run(
        "INSERT INTO tl_assistants VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        a["assistant_id"],
        owner,
        a["graph_id"],
        a["name"],
        a.get("description"),
        dumps(a.get("config") or {}),
        dumps(a.get("context") or {}),
        dumps(a.get("metadata") or {}),
        a.get("version", 1),
        a.get("created_at") or now,
        now,
    )
    found = get_assistant(tx, owner, a["assistant_id"])
    assert found is not None
    return found


def get_assistant(tx: Tx, owner: str, assistant_id: str) -> dict[str, Any] | None:
    row = tx.row(
        "SELECT * FROM tl_assistants WHERE assistant_id = ? AND owner IN (?, ?)",
        assistant_id,
        owner,
        SYSTEM,
    )
    return None if row is None else assistant_out(row)


def assistant_owned(tx: Tx, owner: str, assistant_id: str) -> bool:
    return (
        tx.row(
            "SELECT 1 AS x FROM tl_assistants WHERE assistant_id = ? AND owner = ?",
            assistant_id,
            owner,
        )
        is not None
    )


def search_assistants(tx: Tx, owner: str, q: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = tx.rows("SELECT * FROM tl_assistants WHERE owner IN (?, ?)", owner, SYSTEM)
    found = [assistant_out(r) for r in rows]
    found = [
        a
        for a in found
        if (not q.get("graph_id") or a["graph_id"] == q["graph_id"])
        and (not q.get("name") or q["name"].lower() in a["name"].lower())
        and matches(a["metadata"], q.get("metadata"))
    ]
    return _sorted(found, q, "created_at")


def delete_assistant(tx: Tx, owner: str, assistant_id: str) -> bool:
    return (
        tx.run(
            "DELETE FROM tl_assistants WHERE assistant_id = ? AND owner = ?", assistant_id, owner
        )
        > 0
    )


def _sorted(
    items: list[dict[str, Any]], q: Mapping[str, Any], default: str
) -> list[dict[str, Any]]:
    key = q.get("sort_by") or default
    items.sort(
        key=lambda i: (i.get(key) is None, str(i.get(key))),
        reverse=q.get("sort_order", "desc") != "asc",
    )
    return page(items, q.get("limit", 10), q.get("offset", 0))


# ---------------------------------------------------------------- threads
def thread_out(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "thread_id": row["thread_id"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "metadata": _loads(row["metadata"]),
        "status": row["status"],
        "values": _loads(row["state_values"]) or {},
        "interrupts": _loads(row["interrupts"]),
        "error": _loads(row["error"]),
    }


def create_thread(
    tx: Tx, owner: str, thread_id: str, metadata: Mapping[str, Any]
) -> dict[str, Any]:
    now = now_iso()
    tx.run(
        "INSERT INTO tl_threads VALUES (?,?,?,?,?,?,?,?,?)",
        thread_id,
        owner,
        dumps(metadata),
        "idle",
        None,
        "{}",
        None,
        now,
        now,
    )
    return get_thread(tx, owner, thread_id) or {}


def get_thread(tx: Tx, owner: str, thread_id: str) -> dict[str, Any] | None:
    row = tx.row("SELECT * FROM tl_threads WHERE thread_id = ? AND owner = ?", thread_id, owner)
    return None if row is None else thread_out(row)


def thread_exists(tx: Tx, thread_id: str) -> bool:
    """Whether any owner has this thread id (ids are global, as checkpoints are)."""
    return tx.row("SELECT 1 AS x FROM tl_threads WHERE thread_id = ?", thread_id) is not None


def patch_thread(tx: Tx, owner: str, thread_id: str, metadata: Mapping[str, Any]) -> None:
    found = get_thread(tx, owner, thread_id)
    if found is not None:
        merged = {**found["metadata"], **metadata}
        tx.run(
            "UPDATE tl_threads SET metadata = ?, updated_at = ? WHERE thread_id = ?",
            dumps(merged),
            now_iso(),
            thread_id,
        )


def set_thread_state(
    tx: Tx, thread_id: str, status: str, values: Any, interrupts: Any, error: Any = None
) -> None:
    """What a run or a state update left: the thread's status, values and pending interrupts."""
    tx.run(
        "UPDATE tl_threads SET status = ?, state_values = ?, interrupts = ?, error = ?, "
        "updated_at = ? WHERE thread_id = ?",
        status,
        dumps(values),
        dumps(interrupts),
        None if error is None else dumps(error),
        now_iso(),
        thread_id,
    )


def set_thread_status(tx: Tx, thread_id: str, status: str) -> None:
    tx.run(
        "UPDATE tl_threads SET status = ?, updated_at = ? WHERE thread_id = ?",
        status,
        now_iso(),
        thread_id,
    )


def delete_thread(tx: Tx, owner: str, thread_id: str) -> bool:
    if tx.run("DELETE FROM tl_threads WHERE thread_id = ? AND owner = ?", thread_id, owner) == 0:
        return False
    tx.run(
        "DELETE FROM tl_events WHERE run_id IN (SELECT run_id FROM tl_runs WHERE thread_id = ?)",
        thread_id,
    )
    tx.run("DELETE FROM tl_runs WHERE thread_id = ?", thread_id)
    return True


def drop_stateless_thread(tx: Tx, thread_id: str) -> None:
    """A stateless run's thread goes; its run and events stay for whoever waits or joins (the
    route that waited deletes them once it has read the result)."""
    tx.run("DELETE FROM tl_threads WHERE thread_id = ?", thread_id)


def search_threads(tx: Tx, owner: str, q: Mapping[str, Any]) -> list[dict[str, Any]]:
    sql, params = "SELECT * FROM tl_threads WHERE owner = ?", [owner]
    if q.get("status"):
        sql += " AND status = ?"
        params.append(q["status"])
    if q.get("ids"):
        ids = list(q["ids"])
        sql += f" AND thread_id IN ({','.join('?' * len(ids))})"
        params += ids
    found = [thread_out(r) for r in tx.rows(sql, *params)]
    found = [
        t
        for t in found
        if matches(t["metadata"], q.get("metadata"))
        and matches(t["values"] if isinstance(t["values"], dict) else {}, q.get("values"))
    ]
    return _sorted(found, q, "created_at")


def count_threads(tx: Tx, owner: str, q: Mapping[str, Any]) -> int:
    return len(search_threads(tx, owner, {**q, "limit": 1 << 62, "offset": 0}))


# ---------------------------------------------------------------- runs
def run_out(row: dict[str, Any]) -> dict[str, Any]:
    out = {
        "run_id": row["run_id"],
        "thread_id": row["thread_id"],
        "assistant_id": row["assistant_id"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "status": row["status"],
        "metadata": _loads(row["metadata"]),
        "kwargs": _loads(row["kwargs"]),
        "multitask_strategy": row["multitask_strategy"],
    }
    if row.get("cancel_action"):
        out["cancel_reason"] = row["cancel_action"]
    return out


def insert_run(tx: Tx, owner: str, run: Mapping[str, Any]) -> None:
    now = increasing_iso()  # runs of a thread are taken in this order
    tx.run(
        "INSERT INTO tl_runs (run_id, thread_id, owner, assistant_id, status, kwargs, metadata, "
        "multitask_strategy, stateless, start_after, attempt, created_at, updated_at) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        run["run_id"],
        run["thread_id"],
        owner,
        run["assistant_id"],
        "pending",
        dumps(run["kwargs"]),
        dumps(run.get("metadata") or {}),
        run["multitask_strategy"],
        int(run["stateless"]),
        run.get("start_after") or now,
        0,
        now,
        now,
    )


def get_run(
    tx: Tx, owner: str | None, run_id: str, thread_id: str | None = None
) -> dict[str, Any] | None:
    """A run; ``owner=None`` (workers) sees every run."""
    row = tx.row("SELECT * FROM tl_runs WHERE run_id = ?", run_id)
    if row is None or (owner is not None and row["owner"] != owner):
        return None
    if thread_id is not None and row["thread_id"] != thread_id:
        return None
    return run_out(row)


def run_row(tx: Tx, run_id: str) -> dict[str, Any] | None:
    return tx.row("SELECT * FROM tl_runs WHERE run_id = ?", run_id)


def active_runs(tx: Tx, thread_id: str) -> list[dict[str, Any]]:
    return tx.rows(
        "SELECT * FROM tl_runs WHERE thread_id = ? AND status IN ('pending', 'running') "
        "ORDER BY created_at",
        thread_id,
    )


def run_ids_in(tx: Tx, owner: str, statuses: Sequence[str]) -> list[str]:
    """The ids of ``owner``'s runs in one of ``statuses``, oldest first."""
    marks = ",".join("?" * len(statuses))
    rows = tx.rows(
        f"SELECT run_id FROM tl_runs WHERE owner = ? AND status IN ({marks}) ORDER BY created_at",
        owner,
        *statuses,
    )
    return [r["run_id"] for r in rows]


def list_runs(
    tx: Tx, owner: str, thread_id: str, limit: int, offset: int, status: str | None
) -> list[dict[str, Any]]:
    rows = tx.rows(
        "SELECT * FROM tl_runs WHERE thread_id = ? AND owner = ? ORDER BY created_at DESC",
        thread_id,
        owner,
    )
    found = [run_out(r) for r in rows if status is None or r["status"] == status]
    return page(found, limit, offset)


def set_run_status(tx: Tx, run_id: str, status: str) -> None:
    tx.run(
        "UPDATE tl_runs SET status = ?, updated_at = ?, lease_until = NULL WHERE run_id = ?",
        status,
        now_iso(),
        run_id,
    )
    tx.notify(RUN_CHANNEL, run_id)


def request_cancel(tx: Tx, run_ids: Sequence[str], action: str) -> None:
    """Ask the runs to stop; a pending one stops at once, a running one at its next step."""
    for run_id in run_ids:
        tx.run(
            "UPDATE tl_runs SET cancel_action = ?, updated_at = ? WHERE run_id = ? "
            "AND status IN ('pending', 'running')",
            action,
            now_iso(),
            run_id,
        )
        tx.run(
            "UPDATE tl_runs SET status = 'interrupted' WHERE run_id = ? AND status = 'pending'",
            run_id,
        )


def cancel_action(tx: Tx, run_id: str) -> str | None:
    row = tx.row("SELECT cancel_action FROM tl_runs WHERE run_id = ?", run_id)
    return None if row is None else row["cancel_action"]


def delete_run(tx: Tx, owner: str | None, run_id: str) -> bool:
    """Delete a run of ``owner`` (any owner's with ``None``) and its stream."""
    if get_run(tx, owner, run_id) is None:
        return False
    tx.run("DELETE FROM tl_runs WHERE run_id = ?", run_id)
    tx.run("DELETE FROM tl_events WHERE run_id = ?", run_id)
    return True


# ---------------------------------------------------------------- stream events
def append_events(tx: Tx, run_id: str, first_seq: int, events: Sequence[tuple[str, str]]) -> None:
    for offset, (event, data) in enumerate(events):
        tx.run("INSERT INTO tl_events VALUES (?,?,?,?)", run_id, first_seq + offset, event, data)
    tx.notify(RUN_CHANNEL, run_id)


def events_after(tx: Tx, run_id: str, seq: int) -> list[dict[str, Any]]:
    return tx.rows(
        "SELECT seq, event, data FROM tl_events WHERE run_id = ? AND seq > ? ORDER BY seq",
        run_id,
        seq,
    )


def put_system_assistant(tx: Tx, a: Mapping[str, Any]) -> None:
    """The assistant of a served graph, made once and kept (its created_at stays)."""
    if tx.row("SELECT 1 AS x FROM tl_assistants WHERE assistant_id = ?", a["assistant_id"]):
        return
    put_assistant(tx, SYSTEM, a)
