"""What ``add_node`` makes of its action and options: runnables as nodes, destinations with
edge labels, and the defaults ``set_node_defaults`` gives nodes without options of their own."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.cache.keys import node_namespace
from threadline.errors import GraphValidationError
from threadline.graph.spec import CallStyle, ErrorHandler, NodeCache, NodeSpec
from threadline.types import CachePolicy, RetryPolicy, TimeoutPolicy


def is_runnable(action: Any) -> bool:
    """A LangChain runnable (a ``RunnableSequence``, a ``StructuredTool``...), or an object
    that cannot be called but has ``invoke``/``ainvoke``: LangGraph runs it as a node with the
    state and the config. Other callables (threadline's ``ToolNode`` too) are called."""
    if inspect.isroutine(action) or hasattr(action, "spec"):  # a compiled graph: a subgraph
        return False
    if any(
        c.__name__ == "Runnable" and c.__module__.startswith("langchain_core.")
        for c in type(action).__mro__
    ):
        return True
    has_methods = callable(getattr(action, "invoke", None)) and callable(
        getattr(action, "ainvoke", None)
    )
    return has_methods and not callable(action)


def runnable_node(
    name: str,
    runnable: Any,
    retry: tuple[RetryPolicy, ...],
    destinations: tuple[str, ...] | None,
) -> NodeSpec:
    """A node calling ``runnable.invoke(state, config)`` (``ainvoke`` in async runs)."""

    def call(state: Any, config: dict[str, Any]) -> Any:
        return runnable.invoke(state, config)

    async def acall(state: Any, config: dict[str, Any]) -> Any:
        return await runnable.ainvoke(state, config)

    return NodeSpec(name, call, acall, CallStyle(config=True), retry, destinations)


def destination_targets(
    node: str, destinations: Mapping[str, str] | Sequence[str] | None
) -> tuple[tuple[str, ...] | None, dict[str, str]]:
    """``add_node(destinations=...)``: the nodes it may go to, and their edge labels (a dict
    maps a target to its label, as in LangGraph; labels only change the drawing)."""
    if destinations is None:
        return None, {}
    if isinstance(destinations, str):
        raise GraphValidationError(
            f"destinations of {node!r} must be a list or a dict of node names, not a string"
        )
    if isinstance(destinations, Mapping):
        return tuple(destinations), {k: str(v) for k, v in destinations.items() if v != k}
    return tuple(destinations), {}


@dataclass(slots=True)
class NodeDefaults:
    """``set_node_defaults``: options for nodes added without their own, applied at compile."""

    retry: tuple[RetryPolicy, ...] = ()
    cache_policy: CachePolicy[Any] | None = None
    timeout: TimeoutPolicy | None = None
    error_handler: ErrorHandler | None = None
    actions: dict[str, Any] = field(default_factory=dict)  # each node's action (cache keys)

    def applied(self, node: NodeSpec) -> NodeSpec:
        """``node`` with the defaults it has no value of its own for."""
        changes: dict[str, Any] = {}
        if self.retry and not node.retry:
            changes["retry"] = self.retry
        if self.error_handler is not None and node.error_handler is None:
            changes["error_handler"] = self.error_handler
        if self.timeout is not None and node.timeout is None:
            changes["timeout"] = self.timeout
        if self.cache_policy is not None and node.cache is None and node.name in self.actions:
            namespace = node_namespace(node.name, self.actions[node.name])
            changes["cache"] = NodeCache(self.cache_policy, namespace)
        return dataclasses.replace(node, **changes) if changes else node
