"""Task ids: made from the checkpoint a step starts from, the task's place in it and its name,
so the same step planned again (after a crash, on resume) gives its tasks the same ids."""

from __future__ import annotations

import hashlib


def task_id(checkpoint_id: str, index: int, name: str) -> str:
    """Deterministic, so writes saved before a crash can be matched to the task after it."""
    digest = hashlib.blake2b(f"{checkpoint_id}|{index}|{name}".encode(), digest_size=16)
    return digest.hexdigest()


def local_task_id(checkpoint_id: str, index: int, name: str) -> str:
    """For runs without a saver: unique within the run (its checkpoint ids are), not hashed."""
    return f"{checkpoint_id}.{index}"
