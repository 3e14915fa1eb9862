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


# Optional drivers and the extra that installs each
_EXTRAS = {"psycopg": "postgres", "psycopg_pool": "postgres", "redis": "redis"}


def import_with_extra(module: str) -> Any:
    """``importlib.import_module(module)``; a missing optional driver is a
    ``ModuleNotFoundError`` that says which extra to install, as the other extras' errors do."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        driver = (exc.name or "").split(".")[0]
        extra = _EXTRAS.get(driver)
        if extra is None:
            raise
        raise ModuleNotFoundError(
            f"{module} needs {driver}, which is not installed: pip install 'threadline[{extra}]'",
            name=exc.name,
        ) from exc
