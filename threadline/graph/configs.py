"""Reading a run's config: its thread, checkpoint, recursion limit and filterable metadata."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadline.checkpoint.base import BaseSaver, CheckpointRecord
from threadline.errors import ConfigError, ThreadIdRequiredError

DEFAULT_RECURSION_LIMIT = 10_000
_RESERVED_CONFIGURABLE = {"thread_id", "checkpoint_id", "checkpoint_ns"}


def configurable_of(config: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict((config or {}).get("configurable") or {})


def thread_id_of(configurable: Mapping[str, Any], saver: BaseSaver | None) -> str | None:
    if saver is None:
        return None
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise ThreadIdRequiredError(
            "this graph has a checkpointer, so it needs a thread id: pass "
            "config={'configurable': {'thread_id': '...'}}"
        )
    return str(thread_id)


def recursion_limit(config: Mapping[str, Any]) -> int:
    limit = config.get("recursion_limit", DEFAULT_RECURSION_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ConfigError(f"recursion_limit must be a positive integer, got {limit!r}")
    return limit


def checkpoint_metadata(
    config: Mapping[str, Any], configurable: Mapping[str, Any]
) -> dict[str, Any]:
    """Scalar values of the config's metadata and configurable, so history can be filtered."""
    merged = {**dict(config.get("metadata") or {}), **configurable}
    return {
        k: v
        for k, v in merged.items()
        if k not in _RESERVED_CONFIGURABLE
        and not k.startswith("__")
        and isinstance(v, str | int | float | bool)
    }


def before_id(before: Mapping[str, Any] | str | None) -> str | None:
    if before is None or isinstance(before, str):
        return before
    return configurable_of(before).get("checkpoint_id")


def config_of(record: CheckpointRecord) -> dict[str, Any]:
    from threadline.runtime.snapshot import checkpoint_config

    return checkpoint_config(record.thread_id, record.checkpoint_ns, record.checkpoint.id)
