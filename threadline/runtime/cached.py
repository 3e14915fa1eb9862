"""The node cache: a task of a node with a ``CachePolicy`` first looks for its stored output.

What a node returned is stored — its updates and ``Command(goto=...)`` targets, never an error
or an interrupt — and on a hit the node does not run. Its edges and branches are not stored: the
graph routes a hit as it is now, so a graph edited since (a new edge, a changed condition) is
never sent the old way by an old entry. Entries are keyed by the node (its function and name)
and by ``policy.key_func`` of the node's input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadline.cache.keys import FullKey, hashed_key
from threadline.errors import SerializationError

if TYPE_CHECKING:
    from threadline.cache.base import BaseCache
    from threadline.graph.spec import NodeCache
    from threadline.runtime.task import StepEnv, Task


def entry_key(task: Task, env: StepEnv, node_cache: NodeCache) -> FullKey:
    """The cache entry of ``task``: its node's namespace and the hash of its input's key."""
    try:
        return node_cache.namespace, hashed_key(node_cache.policy.key_func, task.node_input(env))
    except SerializationError as exc:
        raise SerializationError(
            f"cannot make a cache key for the input of node {task.name!r}: {exc}. Give the "
            "node's CachePolicy a key_func that returns str or bytes",
            path=exc.path,
            type_name=exc.type_name,
        ) from exc


def remember(cache: BaseCache[Any], key: FullKey, result: Any, node_cache: NodeCache) -> None:
    """Store a task's output under its policy's time to live."""
    try:
        cache.set({key: (result, node_cache.policy.ttl)})
    except SerializationError as exc:
        raise _not_stored(exc, key) from exc


async def aremember(
    cache: BaseCache[Any], key: FullKey, result: Any, node_cache: NodeCache
) -> None:
    try:
        await cache.aset({key: (result, node_cache.policy.ttl)})
    except SerializationError as exc:
        raise _not_stored(exc, key) from exc


def _not_stored(exc: SerializationError, key: FullKey) -> SerializationError:
    return SerializationError(
        f"cannot store the result of node {key[0][-1]!r} in the cache: {exc}",
        path=exc.path,
        type_name=exc.type_name,
    )
