"""What a saver is told about a new checkpoint, so it writes only what changed."""

from __future__ import annotations

from typing import Any

from threadline.checkpoint.base import Checkpoint, StorageHints


def storage_hints(saved: Checkpoint | None, cp: Checkpoint) -> StorageHints:
    """Which values of ``cp`` are new since ``saved``, and which of them only grew a list."""
    if saved is None:
        return StorageHints(frozenset(cp.values))
    before = saved.versions
    changed = frozenset([k for k, v in cp.versions.items() if before.get(k) != v])
    extends: dict[str, tuple[str, int]] = {}
    for key in changed:
        new = cp.values[key]
        if isinstance(new, list) and key in before and _grew(old := saved.values.get(key), new):
            extends[key] = (before[key], len(old))
    return StorageHints(changed, extends)


def _grew(old: Any, new: Any) -> bool:
    """``new`` is ``old`` plus items at the end (items compare by identity first: cheap)."""
    if not (isinstance(old, list) and isinstance(new, list)) or len(new) <= len(old):
        return False
    try:
        return new[: len(old)] == old
    except Exception:
        return False
