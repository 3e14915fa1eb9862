"""When a failed attempt of a node or task is tried again: its retry policies, first match wins.

LangGraph takes one ``RetryPolicy`` or a list of them for ``add_node``, ``@task`` and
``@entrypoint``; the first whose ``retry_on`` accepts the error decides, with its own
``max_attempts`` and backoff.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from threadline.types import RetryPolicy


def retry_policies(policy: RetryPolicy | Sequence[RetryPolicy] | None) -> tuple[RetryPolicy, ...]:
    """One policy or several, checked where they are given."""
    if policy is None:
        return ()
    policies = (policy,) if isinstance(policy, RetryPolicy) else tuple(policy)
    for p in policies:
        if not isinstance(p, RetryPolicy):
            raise TypeError(f"retry_policy must be a RetryPolicy or a list of them, got {p!r}")
    return policies


def retry_delay(policies: tuple[RetryPolicy, ...], attempt: int, exc: Exception) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``, or ``None`` to give up."""
    policy = next((p for p in policies if p.should_retry(exc)), None)
    if policy is None or attempt >= policy.max_attempts:
        return None
    delay = min(
        policy.max_interval, policy.initial_interval * policy.backoff_factor ** (attempt - 1)
    )
    if policy.jitter:
        delay += random.uniform(0, 1)
    return delay
