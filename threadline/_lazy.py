"""Package attributes imported on first use (PEP 562), for names whose import is costly."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(namespace: dict[str, Any], table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``name`` from ``table[name]`` and keeps it."""
    module_name = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        source = table.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    return __getattr__
