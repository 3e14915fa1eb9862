"""Reading a state schema (TypedDict, dataclass or pydantic model) into keys and reducers.

A graph may have several schemas (state, input, output and node input schemas); its channels
are their union, and each schema reads only its own keys out of the graph's values.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from threadline.errors import GraphValidationError, InvalidUpdateError
from threadline.managed.is_last_step import ManagedValue, managed_value_of

if TYPE_CHECKING:
    from pydantic import BaseModel

Reducer = Callable[[Any, Any], Any]
SchemaKind = Literal["typeddict", "dataclass", "pydantic", "root"]
# The one channel of a state that is not a class of keys (``StateGraph(int)``,
# ``StateGraph(Annotated[list, operator.add])``): nodes get and return the value itself.
ROOT = "__root__"


@dataclass(frozen=True, slots=True)
class Channel:
    """One state key: how writes combine (``reducer``; ``None`` = replace) and its start value."""

    key: str
    reducer: Reducer | None
    default_factory: Callable[[], Any] | None


@dataclass(frozen=True, slots=True)
class StateSchema:
    """The keys of a state and how nodes see it.

    ``own_keys`` is set when the values it reads hold other keys too (the graph's channels are
    wider than this schema): only these are passed on. ``None`` means every value is its own.
    ``managed``: keys the run computes for each step (``RemainingSteps``), by their manager;
    they are not channels.
    """

    cls: type
    kind: SchemaKind
    channels: dict[str, Channel]
    own_keys: frozenset[str] | None = None
    managed: Mapping[str, type[ManagedValue]] = dataclasses.field(default_factory=dict)

    def initial_values(self) -> dict[str, Any]:
        """Values a fresh thread starts with: the zero value of each key that has a reducer."""
        return {c.key: c.default_factory() for c in self.channels.values() if c.default_factory}

    def node_input(self, values: Mapping[str, Any]) -> Any:
        """The object a node receives: a dict copy, or an instance of the schema class.

        A pydantic model's ``ValidationError`` is raised as it is (callers catch that type),
        with a note saying how to fix the state.
        """
        if self.kind == "root":
            return values.get(ROOT)
        own = self.own_keys
        fields = dict(values) if own is None else {k: v for k, v in values.items() if k in own}
        if self.kind == "typeddict":
            return fields
        try:
            return self.cls(**fields)
        except Exception as exc:
            if self.kind == "pydantic" and _is_validation_error(exc):
                exc.add_note(_FIT_HINT.format(self.cls.__name__))
                raise
            raise InvalidUpdateError(
                f"state does not fit {self.cls.__name__}: {exc}. "
                "Give required fields a value in the input or a default in the schema."
            ) from exc

    def reading(self, keys: Iterable[str]) -> StateSchema:
        """This schema reading values that may hold ``keys`` besides its own."""
        if set(keys) <= self.channels.keys():
            return self
        return dataclasses.replace(self, own_keys=frozenset([*self.channels, *self.managed]))

    def widened(self, others: Iterable[StateSchema]) -> StateSchema:
        """This schema with the channels of ``others`` added after its own, in order.

        A key in two schemas keeps its first channel, unless a later one brings a different
        reducer: that is ambiguous, so it is refused (as LangGraph does).
        """
        channels = dict(self.channels)
        others = list(others)
        for other in others:
            for key, channel in other.channels.items():
                first = channels.setdefault(key, channel)
                if channel.reducer is not None and channel.reducer is not first.reducer:
                    raise GraphValidationError(
                        f"key {key!r} has reducer {_name(first.reducer)} in one schema and "
                        f"{_name(channel.reducer)} in {other.cls.__name__}; use one reducer"
                    )
        managed = {**{k: m for o in others for k, m in o.managed.items()}, **self.managed}
        if len(channels) == len(self.channels) and len(managed) == len(self.managed):
            return self
        own = frozenset([*self.channels, *self.managed])
        return StateSchema(self.cls, self.kind, channels, own, managed)

    def input_values(self, value: Any) -> dict[str, Any]:
        """Turn an ``invoke`` input (a dict or a schema instance) into a dict of updates.

        Managed keys are left out: the run computes them (LangGraph ignores them too).
        """
        values = self._input_values(value)
        if self.managed:
            return {k: v for k, v in values.items() if k not in self.managed}
        return values

    def _input_values(self, value: Any) -> dict[str, Any]:
        if isinstance(value, Mapping):
            return dict(value)
        if (
            self.kind == "dataclass"
            and isinstance(value, self.cls)
            and dataclasses.is_dataclass(value)
        ):
            return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if self.kind == "pydantic" and isinstance(value, self.cls):
            return _model_updates(value)
        raise InvalidUpdateError(
            f"input must be a dict or a {self.cls.__name__}, got {type(value).__name__}"
        )


def _model_updates(model: Any) -> dict[str, Any]:
    """A pydantic instance as updates, as LangGraph takes it: every field, except one that is
    ``None`` by default and was left so (writing it would clear what the state holds)."""
    updates = {}
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if value is not None or info.default is not None or name in model.model_fields_set:
            updates[name] = value
    return updates


def read_schema(cls: type) -> StateSchema:
    """Inspect ``cls`` once, at graph build time, so bad reducers fail early.

    A state that declares no keys (``int``, ``list[str]``, ``dict``, ``Annotated[list,
    operator.add]``: no ``__annotations__``, as LangGraph tells them apart) is one value.
    """
    if not is_schema_class(cls) and not hasattr(_unqualified(cls), "__annotations__"):
        return root_schema(cls)
    kind = _schema_kind(cls)
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:
        raise GraphValidationError(f"cannot read the type hints of {cls.__name__}: {exc}") from exc
    if kind == "pydantic" and is_pydantic_model(cls):
        hints = {name: hints.get(name, Any) for name in cls.model_fields}
    if not hints:
        raise GraphValidationError(f"state schema {cls.__name__} declares no keys")
    managed = {k: m for k, h in hints.items() if (m := managed_value_of(_unqualified(h)))}
    channels = {key: _channel(cls, key, h) for key, h in hints.items() if key not in managed}
    return StateSchema(cls=cls, kind=kind, channels=channels, managed=managed)


def root_schema(hint: Any) -> StateSchema:
    """The schema of a state that is one value: one channel, with the reducer of an
    ``Annotated[T, reducer]`` hint (then starting from ``T()``), else replaced by each write."""
    hint = _unqualified(hint)
    base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
    cls = typing.get_origin(base) or base
    if not isinstance(cls, type):
        raise GraphValidationError(f"state schema must be a class or a type, got {hint!r}")
    channel = _channel(cls, ROOT, hint)
    return StateSchema(cls=cls, kind="root", channels={ROOT: channel})


_FIT_HINT = (
    "threadline: the state a node reads does not fit {}; check the input and what earlier "
    "nodes wrote (a node's writes are validated when the next node reads them)"
)


def _is_validation_error(exc: Exception) -> bool:
    return any(c.__name__ == "ValidationError" for c in type(exc).__mro__)


def _name(reducer: Reducer | None) -> str:
    return "none" if reducer is None else getattr(reducer, "__name__", repr(reducer))


def is_typeddict(cls: Any) -> bool:
    """``typing`` and ``typing_extensions`` TypedDicts alike (3.11's ``typing.is_typeddict``
    does not know the latter's metaclass; both make dict subclasses with these attributes)."""
    if typing.is_typeddict(cls):
        return True
    return (
        isinstance(cls, type)
        and issubclass(cls, dict)
        and hasattr(cls, "__required_keys__")
        and hasattr(cls, "__optional_keys__")
    )


def is_schema_class(cls: Any) -> bool:
    """A class ``read_schema`` accepts: a TypedDict, a dataclass or a pydantic model."""
    return isinstance(cls, type) and (
        is_typeddict(cls) or dataclasses.is_dataclass(cls) or is_pydantic_model(cls)
    )


def is_pydantic_model(cls: type) -> TypeGuard[type[BaseModel]]:
    """A pydantic model class (pydantic is imported only by a program that made one)."""
    return hasattr(cls, "model_fields") and hasattr(cls, "model_validate")


def _schema_kind(cls: Any) -> SchemaKind:
    if not isinstance(cls, type):
        raise GraphValidationError(
            f"state schema must be a class (TypedDict, dataclass or pydantic model), got {cls!r}"
        )
    if is_typeddict(cls):
        return "typeddict"
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    if is_pydantic_model(cls):
        return "pydantic"
    if typing.get_type_hints(cls):  # a plain annotated class: its keys, read as dicts
        return "typeddict"
    raise GraphValidationError(
        f"state schema {cls.__name__} must be a TypedDict, a dataclass or a pydantic model"
    )


def _channel(cls: type, key: str, hint: Any) -> Channel:
    hint = _unqualified(hint)
    reducer = _reducer_of(hint)
    if reducer is None:
        return Channel(key, None, None)
    _check_reducer(cls, key, reducer)
    return Channel(key, reducer, _zero_factory(typing.get_args(hint)[0]))


_QUALIFIERS = frozenset({"Required", "NotRequired", "ReadOnly"})


def _unqualified(hint: Any) -> Any:
    """``Required[Annotated[list, add]]`` -> ``Annotated[list, add]`` (also NotRequired, ReadOnly,
    from ``typing`` or ``typing_extensions``): the qualifier says nothing about how keys merge."""
    while getattr(typing.get_origin(hint), "_name", None) in _QUALIFIERS:
        hint = typing.get_args(hint)[0]
    return hint


def _reducer_of(hint: Any) -> Reducer | None:
    if typing.get_origin(hint) is not typing.Annotated:
        return None
    extras = hint.__metadata__
    return extras[-1] if extras and callable(extras[-1]) else None


def _check_reducer(cls: type, key: str, reducer: Reducer) -> None:
    try:
        sig = inspect.signature(reducer)
    except (TypeError, ValueError):
        return  # builtins such as operator.add have no signature; trust them
    params = [
        p
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    has_varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    required = [p for p in params if p.default is p.empty and p.kind is not p.VAR_POSITIONAL]
    if not has_varargs and (len(params) < 2 or len(required) > 2):
        raise GraphValidationError(
            f"reducer {getattr(reducer, '__name__', reducer)!r} of key {cls.__name__}.{key} "
            "must take two arguments (current value, update)"
        )


_CONCRETE: dict[Any, type] = {
    collections.abc.Sequence: list,
    collections.abc.MutableSequence: list,
    collections.abc.Set: set,
    collections.abc.MutableSet: set,
    collections.abc.Mapping: dict,
    collections.abc.MutableMapping: dict,
}


def _zero_factory(value_type: Any) -> Callable[[], Any] | None:
    """``list`` for ``list[str]`` and so on: a type that can be built with no arguments.

    An abstract collection gets its plain kind, as in LangGraph: ``Sequence[BaseMessage]``
    (common in its docs) starts as ``[]``, so the reducer sees the first update too."""
    origin = typing.get_origin(value_type) or value_type
    origin = _CONCRETE.get(origin, origin)
    if not isinstance(origin, type):
        return None
    try:
        origin()
    except Exception:
        return None
    return origin
