"""``InjectedState`` and ``InjectedStore``: tool parameters the graph fills in, hidden from the
model.

``Annotated[dict, InjectedState]`` receives the graph state, ``Annotated[str,
InjectedState("key")]`` one of its keys, and ``Annotated[BaseStore, InjectedStore()]`` the
graph's store. With langchain-core installed both derive from its ``InjectedToolArg``, so a
langchain-core ``@tool`` leaves them out of the schema it shows the model, as in LangGraph.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from threadline.messages import USES_LANGCHAIN

if USES_LANGCHAIN:
    from langchain_core.tools import InjectedToolArg as _InjectedBase
else:

    class _InjectedBase:  # type: ignore[no-redef]
        """A tool parameter the caller fills in, not the model."""


class InjectedState(_InjectedBase):
    """Marks a tool parameter that receives the graph state, or its key ``field``."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field


class InjectedStore(_InjectedBase):
    """Marks a tool parameter that receives the store the graph was compiled with."""


@dataclass(frozen=True, slots=True)
class Injections:
    """What a tool's parameters receive from the graph: ``state`` maps a parameter to the state
    key it takes (``None``: the whole state); ``store`` names the parameter taking the store."""

    state: dict[str, str | None] = field(default_factory=dict)
    store: str | None = None

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.state) | ({self.store} if self.store else frozenset())

    def values(self, tool: str, state: Any, store: Any) -> dict[str, Any]:
        """The injected parameters' values for one call of ``tool``."""
        values: dict[str, Any] = {}
        for name, key in self.state.items():
            values[name] = state if key is None else _state_value(tool, state, key)
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
    except Exception:  # unresolvable hints say nothing
        return {}


def _injections(hints: Iterable[tuple[str, Any]]) -> Injections:
    state: dict[str, str | None] = {}
    store: str | None = None
    for name, hint in hints:
        for marker in typing.get_args(hint)[1:] if _is_annotated(hint) else ():
            if marker is InjectedState or isinstance(marker, InjectedState):
                state[name] = None if isinstance(marker, type) else marker.field
            elif marker is InjectedStore or isinstance(marker, InjectedStore):
                store = name
    return Injections(state, store)


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
