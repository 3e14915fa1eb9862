"""Debian's Chromium for Playwright: where it is, how it is launched, and what happens without it.

Playwright's own browser download cannot be used here; the tests drive ``/usr/bin/chromium``
(``apt-get install chromium``; ``make test`` installs it when apt-get is available). Without it
(or without the ``playwright`` package) the browser tests skip on a developer machine and fail
under ``CI=true``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from services import in_ci

# Tests import ``expect`` from here, so that without playwright they are collected and skipped
# (by the ``browser`` fixture, with the advice below) rather than fail to import.
expect: Any
try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - reported by require_browser()
    expect = None

CHROMIUM = Path(os.environ.get("THREADLINE_TEST_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HOW = "install it with `apt-get install -y chromium` and `pip install 'playwright>=1.40,<2'`"


def browser_problem() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        return f"the playwright package is not installed ({exc})"
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM}"
    return None


def require_browser() -> Path:
    problem = browser_problem()
    if problem:
        message = f"browser tests need Debian's Chromium: {problem}; {HOW}"
        if in_ci():
            pytest.fail(f"{message} (CI=true: a missing browser is a failure)", pytrace=False)
        pytest.skip(message)
    return CHROMIUM
