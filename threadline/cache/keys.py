"""Cache keys: where a node's cached writes live, and the default key of a node's input.

A key must be the same for equal inputs in any process (a ``SqliteCache`` outlives the run), so
the default key encodes a canonical form of the input: dict items and set members sorted,
dataclasses and pydantic models by class name and fields. It uses threadline's serde, never
pickle; the encoding is only hashed, never decoded.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from threadline import serde

NODE_WRITES = "__node_writes__"  # first part of the namespace of every node's cached writes

Namespace = tuple[str, ...]
FullKey = tuple[Namespace, str]


def default_cache_key(*args: Any, **kwargs: Any) -> bytes:
    """A stable encoding of the arguments: equal inputs give equal bytes."""
    return serde.dumps((_canonical(args), _canonical(kwargs)))


def hashed_key(key_func: Callable[[Any], Any], node_input: Any) -> str:
    """The entry key of ``node_input``: a hash of what the policy's ``key_func`` returns."""
    raw = key_func(node_input)
    if isinstance(raw, str):
        raw = raw.encode()
    elif not isinstance(raw, bytes | bytearray | memoryview):
        raise TypeError(
            f"a CachePolicy key_func must return str or bytes, got {type(raw).__name__}"
        )
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def node_namespace(name: str, action: Any) -> Namespace:
    """Where node ``name``'s entries live: named after its function, so two graphs that run the
    same function under the same node name share entries (as in LangGraph)."""
    return (NODE_WRITES, _identifier(action), name)


def _identifier(action: Any) -> str:
    nodes = getattr(getattr(action, "spec", None), "nodes", None)
    if nodes is not None:  # a compiled graph: named by its nodes, the same in every process
        return "graph:" + ",".join(sorted(nodes))
    qualname = getattr(action, "__qualname__", None)
    module = getattr(action, "__module__", None)
    if isinstance(qualname, str) and isinstance(module, str):
        return f"{module}.{qualname}"
    return "__dynamic__"


def _canonical(obj: Any) -> Any:
    """``obj`` with every unordered or class-specific part made deterministic."""
    if isinstance(obj, str | bytes | int | float | bool) or obj is None:
        return obj
    if isinstance(obj, Mapping):
        return tuple(_sorted((_canonical(k), _canonical(v)) for k, v in obj.items()))
    if isinstance(obj, list | tuple):
        return tuple(_canonical(item) for item in obj)
    if isinstance(obj, set | frozenset):
        return tuple(_sorted(_canonical(item) for item in obj))
    cls = type(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return (_class_name(cls), _canonical(fields))
    dump = getattr(obj, "model_dump", None)
    if callable(dump) and not isinstance(obj, type):  # a pydantic model
        return (_class_name(cls), _canonical(dump()))
    tobytes = getattr(obj, "tobytes", None)
    if callable(tobytes):  # numpy arrays and the like
        return (_class_name(cls), tobytes(), _canonical(getattr(obj, "shape", None)))
    return obj


def _sorted(items: Any) -> list[Any]:
    items = list(items)
    try:
        return sorted(items)
    except TypeError:  # keys of mixed types
        return sorted(items, key=lambda item: (type(item).__qualname__, repr(item)))


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
