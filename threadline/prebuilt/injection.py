"""``InjectedState``, ``InjectedStore`` and ``ToolRuntime``: tool parameters the graph fills in,
hidden from the model.

``Annotated[dict, InjectedState]`` receives the graph state, ``Annotated[str,
InjectedState("key")]`` one of its keys, ``Annotated[BaseStore, InjectedStore()]`` the graph's
store, and a parameter annotated ``ToolRuntime`` all of these with the run's context, config,
stream writer and the call's id. With langchain-core installed they derive from its injected
argument classes, so a langchain-core ``@tool`` leaves them out of the schema it shows the
model, as in LangGraph.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from threadline.messages import USES_LANGCHAIN
from threadline.store.base import BaseStore

if USES_LANGCHAIN:
    from langchain_core.tools import InjectedToolArg as _InjectedBase
    from langchain_core.tools.base import _DirectlyInjectedToolArg as _RuntimeBase
else:

    class _InjectedBase:  # type: ignore[no-redef]
        """A tool parameter the caller fills in, not the model."""

    class _RuntimeBase:  # type: ignore[no-redef]
        """A tool parameter the caller fills in, recognised by its type alone."""


ContextT = TypeVar("ContextT")
StateT = TypeVar("StateT")


class InjectedState(_InjectedBase):
    """Marks a tool parameter that receives the graph state, or its key ``field``."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field


class InjectedStore(_InjectedBase):
    """Marks a tool parameter that receives the store the graph was compiled with."""


@dataclass
class ToolRuntime(_RuntimeBase, Generic[ContextT, StateT]):
    """What a tool parameter annotated ``ToolRuntime`` receives: the graph state, the run's
    context (``invoke(..., context=...)``), config and stream writer, the call's id and the
    store."""

    state: StateT
    context: ContextT
    config: dict[str, Any]
    stream_writer: Callable[[Any], None]
    tool_call_id: str | None
    store: BaseStore | None

    def __class_getitem__(cls, params: Any) -> Any:
        """``ToolRuntime[Context]`` alone is allowed, as in LangGraph (the state type then
        defaults to ``Any``)."""
        given = params if isinstance(params, tuple) else (params,)
        return super().__class_getitem__(given + (Any,) * (2 - len(given)))  # type: ignore[misc]


@dataclass(frozen=True, slots=True)
class Injections:
    """What a tool's parameters receive from the graph: ``state`` maps a parameter to the state
    key it takes (``None``: the whole state); ``store`` names the parameter taking the store."""

    state: dict[str, str | None] = field(default_factory=dict)
    store: str | None = None
    runtime: str | None = None  # the parameter taking the ToolRuntime

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.state) | {n for n in (self.store, self.runtime) if n}

    def values(
        self, call: Mapping[str, Any], state: Any, store: BaseStore | None
    ) -> dict[str, Any]:
        """The injected parameters' values for one tool call."""
        tool = call["name"]
        values: dict[str, Any] = {}
        for name, key in self.state.items():
            values[name] = state if key is None else _state_value(tool, state, key)
        if self.runtime:
            values[self.runtime] = _tool_runtime(call, state, store)
        if self.store:
            if store is None:
                raise ValueError(
                    "Cannot inject store into tools with InjectedStore annotations - "
                    "please compile your graph with a store."
                )
            values[self.store] = store
        return values


def injections_of_function(fn: Callable[..., Any]) -> Injections:
    """The injected parameters of a plain function, from its ``Annotated`` hints."""
    return _injections(type_hints(fn, include_extras=True).items())


def injections_of_langchain_tool(tool: Any) -> Injections:
    """The injected parameters of a langchain-core tool, from its input schema."""
    from langchain_core.tools.base import get_all_basemodel_annotations

    return _injections(get_all_basemodel_annotations(tool.get_input_schema()).items())


def type_hints(fn: Any, *, include_extras: bool = False) -> dict[str, Any]:
    """The type hints of a function, or of the function a callable wraps."""
    target = inspect.unwrap(fn)
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = getattr(target, "__call__", target)  # noqa: B004 - a callable object
    try:
        return typing.get_type_hints(target, include_extras=include_extras)
    except Exception:  # one unresolvable hint (a class local to a function): the others
        return {
            name: _resolved(target, param.annotation)
            for name, param in inspect.signature(target).parameters.items()
            if param.annotation is not param.empty
        }


def _resolved(fn: Any, hint: Any) -> Any:
    """A string annotation evaluated in the function's module, or the string if it cannot be."""
    if not isinstance(hint, str):
        return hint
    try:
        return eval(hint, dict(getattr(fn, "__globals__", {})))  # as get_type_hints does
    except Exception:
        return hint


def _injections(hints: Iterable[tuple[str, Any]]) -> Injections:
    state: dict[str, str | None] = {}
    store: str | None = None
    runtime: str | None = None
    for name, hint in hints:
        if _is_tool_runtime(hint):
            runtime = name
        for marker in typing.get_args(hint)[1:] if _is_annotated(hint) else ():
            if marker is InjectedState or isinstance(marker, InjectedState):
                state[name] = None if isinstance(marker, type) else marker.field
            elif marker is InjectedStore or isinstance(marker, InjectedStore):
                store = name
    return Injections(state, store, runtime)


def _tool_runtime(
    call: Mapping[str, Any], state: Any, store: BaseStore | None
) -> ToolRuntime[Any, Any]:
    from threadline.runtime.context import current_task

    ctx = current_task()
    if ctx is None:  # a ToolNode invoked outside a graph
        return ToolRuntime(state, None, {}, _discard, call["id"], store)
    return ToolRuntime(state, ctx.runtime.context, ctx.config, ctx.writer, call["id"], store)


def _discard(_: Any) -> None:
    return None


def _is_tool_runtime(hint: Any) -> bool:
    if isinstance(hint, str):  # unresolvable, e.g. ToolRuntime[LocalContext]
        return hint.split("[", 1)[0].strip().rsplit(".", 1)[-1] == "ToolRuntime"
    return hint is ToolRuntime or typing.get_origin(hint) is ToolRuntime


def _is_annotated(hint: Any) -> bool:
    return typing.get_origin(hint) is typing.Annotated


def _state_value(tool: str, state: Any, key: str) -> Any:
    if isinstance(state, dict):
        if key not in state:
            raise ValueError(
                f"tool {tool!r} takes the state key {key!r} (InjectedState), but the state has "
                f"only {sorted(state)}"
            )
        return state[key]
    if not hasattr(state, key):
        raise ValueError(f"tool {tool!r} takes the state key {key!r}, which the state lacks")
    return getattr(state, key)
