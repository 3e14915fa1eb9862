"""Rules every saver follows, in one place: when a put may land, thread status, clocks, retention.

Backends that keep these rules in their own query language (PostgreSQL functions, Redis
scripts) implement the same checks there; their tests hold them to the same conformance suite.
"""

from __future__ import annotations

from datetime import UTC, datetime

from threadline.checkpoint.base import CheckpointRecord, Retention
from threadline.checkpoint.base import status_of as status_of  # backends import it from here
from threadline.clock import increasing_iso, micros_of
from threadline.errors import ConcurrentUpdateError, ConfigError


def check_keep_last(keep_last: int) -> None:
    """A prune's ``keep_last``: an integer, 0 or more (else ``ConfigError``, a ``ValueError``)."""
    if not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last < 0:
        raise ConfigError(f"keep_last must be an integer, 0 or more, got {keep_last!r}")


def check_put(record: CheckpointRecord, head: str | None, *, fork: bool) -> None:
    """Raise ``ConcurrentUpdateError`` unless ``record`` may be saved on top of ``head``.

    ``head`` is the newest checkpoint id of the record's thread and namespace (``None`` if it
    has none). Without ``fork`` the checkpoint's parent must be that head. In both cases its id
    must sort after the head: checkpoints are never replaced, and a checkpoint that would not
    become the newest (an id made by a clock that is behind) would be silently hidden.
    """
    cp = record.checkpoint
    if not fork and cp.parent_id != head:
        raise ConcurrentUpdateError(
            f"{_where(record)} has moved on: checkpoint {cp.id} was computed from parent "
            f"{_describe(cp.parent_id)}, but the newest checkpoint is {_describe(head)}; nothing "
            "was written. "
            "Load the thread again and retry, or save with fork=True to branch on purpose."
        )
    if head is not None and cp.id <= head:
        raise ConcurrentUpdateError(
            f"{_where(record)}: checkpoint {cp.id} does not sort after the newest checkpoint "
            f"{head}; nothing was written (it is saved already, and checkpoints are never "
            "replaced, or its id was made by a clock that is behind)"
        )


def _describe(checkpoint_id: str | None) -> str:
    return "None (no checkpoint: an empty thread)" if checkpoint_id is None else repr(checkpoint_id)


def _where(record: CheckpointRecord) -> str:
    return f"thread {record.thread_id!r} (namespace {record.checkpoint_ns!r})"


now_iso = increasing_iso  # ``updated_at`` of thread rows: increasing, so it orders them


def created_ts(created_at: str) -> float | None:
    """``created_at`` as Unix seconds (naive means UTC); ``None`` if it is not ISO 8601."""
    micros = micros_of(created_at)
    if micros is not None:
        return micros / 1_000_000  # as datetime does
    try:
        when = datetime.fromisoformat(created_at)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def age_cutoff(retention: Retention | None) -> float | None:
    """Unix time before which retention's ``max_age`` drops checkpoints (``None``: no limit)."""
    if retention is None or retention.max_age is None:
        return None
    return datetime.now(UTC).timestamp() - retention.max_age.total_seconds()


def retention_due(retention: Retention | None, count: int, oldest: str | None) -> bool:
    """Whether ``retention`` would delete anything from a namespace holding ``count``
    checkpoints, the oldest made at ``oldest`` (answered by a backend's put)."""
    if retention is None or count <= 1:
        return False
    if retention.max_checkpoints is not None and count > retention.max_checkpoints:
        return True
    cutoff = age_cutoff(retention)
    oldest_at = created_ts(oldest) if oldest else None
    return cutoff is not None and oldest_at is not None and oldest_at < cutoff


def target_taken(source: str, target: str) -> ValueError:
    return ValueError(
        f"cannot copy thread {source!r} to {target!r}: the target already has checkpoints; "
        "delete it first or pick another id"
    )
