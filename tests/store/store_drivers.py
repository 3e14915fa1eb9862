"""Importing a store's optional driver (psycopg, redis) for the tests of that store.

The rule is ``tests/services.py``'s: a missing driver skips the module on a developer machine,
but fails under CI (``CI=true``), where it means a broken environment, not an optional backend.

Import it as ``from store_drivers import require_driver`` (``tests/store/`` is on ``sys.path``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
from services import in_ci


def require_driver(name: str) -> ModuleType:
    """The module ``name``; if it is not installed, skip the calling test module (fail in CI)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = f"{name} is not installed ({exc})"
        if in_ci():
            pytest.fail(f"{message} (CI=true: a missing driver is a failure)", pytrace=False)
        pytest.skip(message, allow_module_level=True)
