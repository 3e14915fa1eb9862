"""Classes the serializer may rebuild. Loading looks names up here; it never imports modules."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, overload

from threadline.serde import known as known_classes
from threadline.serde._records import describe

T = TypeVar("T", bound=type)

_lock = threading.Lock()
_by_name: dict[str, type] = {}
_by_class: dict[type, str] = {}


@overload
def register(cls: T, *, name: str | None = None) -> T: ...
@overload
def register(cls: None = None, *, name: str | None = None) -> Callable[[T], T]: ...


def register(cls: Any = None, *, name: str | None = None) -> Any:
    """Allow ``cls`` (a dataclass, pydantic model or Enum) to be stored and loaded.

    Use as ``serde.register(MyClass)`` or as a decorator, ``@serde.register`` or
    ``@serde.register(name="billing.Invoice")``. The name (default ``module.QualName``) is what is
    stored; keep it stable when you move the class.
    """

    def apply(klass: T) -> T:
        if not isinstance(klass, type) or describe(klass) is None:
            # refused here rather than at the first save, far from the mistake
            raise TypeError(
                f"serde.register takes a dataclass, pydantic model, NamedTuple or Enum, got "
                f"{klass!r}: make it one of those (put @serde.register above @dataclass), or, "
                "for trusted data only, store it unregistered with Serializer(allow_pickle=True)"
            )
        key = name or f"{klass.__module__}.{klass.__qualname__}"
        if key.startswith(known_classes.PREFIX):
            raise ValueError(
                f"serde names starting with {known_classes.PREFIX!r} are threadline's own (chat "
                f"messages, stored without registering); register {klass!r} under another name"
            )
        with _lock:
            known = _by_name.get(key)
            if known is not None and known is not klass and _same_origin(known, klass) is False:
                raise ValueError(f"serde name {key!r} is already registered for {known!r}")
            _by_name[key] = klass
            _by_class[klass] = key
        return klass

    if cls is None:
        return apply
    return apply(cls)


def _same_origin(a: type, b: type) -> bool:
    """A class re-created by reloading its module may take over its old name."""
    return a.__module__ == b.__module__ and a.__qualname__ == b.__qualname__


def name_of(cls: type) -> str | None:
    """The registered name of ``cls`` (or of a known class: see ``known``), else ``None``."""
    name = _by_class.get(cls)
    if name is None:
        name = known_classes.name_for(cls)
        if name is not None:
            with _lock:
                _by_class[cls] = name
    return name


def lookup(name: str) -> type | None:
    """The class registered under ``name`` (or a known class: see ``known``), else ``None``."""
    cls = _by_name.get(name)
    if cls is None:
        cls = known_classes.class_for(name)
        if cls is not None:
            with _lock:
                _by_name[name] = cls
                _by_class[cls] = name
    return cls
