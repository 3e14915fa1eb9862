"""A run's options (LangGraph's run body) turned into one ``astream`` call of its graph."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from threadline.graph.compiled import CompiledStateGraph
from threadline.server.wire import command_in

# The client's stream mode -> threadline's
STREAM_MODES = {
    "values": "values",
    "updates": "updates",
    "custom": "custom",
    "messages-tuple": "messages",
    "tasks": "tasks",
    "checkpoints": "checkpoints",
    "debug": "debug",
}
_EVENT_NAMES = {"messages": "messages"}


def event_name(client_mode: str) -> str:
    """The SSE event name of a client's stream mode (``messages-tuple`` -> ``messages``)."""
    mode = STREAM_MODES[client_mode]
    return _EVENT_NAMES.get(mode, mode)


@dataclass(frozen=True)
class GraphCall:
    """``graph.astream(input, config, **options)`` for one run."""

    input: Any
    config: dict[str, Any]
    options: dict[str, Any]

    def event_name(self, mode: str) -> str:
        """The SSE event of a chunk of ``mode``: the mode's name, as LangGraph's clients expect."""
        return _EVENT_NAMES.get(mode, mode)

    def continued(self) -> GraphCall:
        """The same run continuing from the thread's newest checkpoint (a retried attempt)."""
        configurable = {
            k: v for k, v in self.config["configurable"].items() if k != "checkpoint_id"
        }
        return dataclasses.replace(
            self, input=None, config={**self.config, "configurable": configurable}
        )


def graph_call(
    graph: CompiledStateGraph,
    assistant: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    run: Mapping[str, Any],
) -> GraphCall:
    command = kwargs.get("command")
    run_input = command_in(command) if command else kwargs.get("input")
    modes = kwargs.get("stream_mode") or ["values"]
    modes = [modes] if isinstance(modes, str) else list(modes)
    options: dict[str, Any] = {
        "stream_mode": [STREAM_MODES[m] for m in dict.fromkeys(modes)],
        "subgraphs": bool(kwargs.get("stream_subgraphs")),
    }
    for key in ("interrupt_before", "interrupt_after"):
        value = kwargs.get(key)
        if value is not None:
            options[key] = list(graph.spec.nodes) if value == "*" else value
    if kwargs.get("durability"):
        options["durability"] = kwargs["durability"]
    context = {**(assistant.get("context") or {}), **(kwargs.get("context") or {})}
    if context:
        options["context"] = _context(graph, context)
    return GraphCall(run_input, _config(graph, assistant, kwargs, run), options)


def _config(
    graph: CompiledStateGraph,
    assistant: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    run: Mapping[str, Any],
) -> dict[str, Any]:
    base, given = assistant.get("config") or {}, kwargs.get("config") or {}
    config = {**base, **given}
    configurable = {**(base.get("configurable") or {}), **(given.get("configurable") or {})}
    configurable["thread_id"] = run["thread_id"]
    checkpoint = kwargs.get("checkpoint") or {}
    checkpoint_id = kwargs.get("checkpoint_id") or checkpoint.get("checkpoint_id")
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    config["configurable"] = configurable
    config["metadata"] = {
        **(config.get("metadata") or {}),
        **(kwargs.get("run_metadata") or {}),
        "run_id": run["run_id"],
        "assistant_id": run["assistant_id"],
        "graph_id": graph.name,
        "run_attempt": run["attempt"],
    }
    return config


def _context(graph: CompiledStateGraph, values: dict[str, Any]) -> Any:
    """The run's context as the graph declares it (a dataclass or model is built from JSON)."""
    schema = graph.context_schema
    if schema is None or (isinstance(schema, type) and issubclass(schema, dict)):
        return values
    try:
        return schema(**values)
    except TypeError:
        return values
