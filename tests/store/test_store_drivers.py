"""A store's missing driver skips its tests on a developer machine and fails them under CI."""

from __future__ import annotations

import pytest
from store_drivers import require_driver

MISSING = "threadline_no_such_driver"


def test_an_installed_driver_is_returned() -> None:
    assert require_driver("sqlite3").__name__ == "sqlite3"


def test_a_missing_driver_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        require_driver(MISSING)


def test_a_missing_driver_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """CI installs every driver: a missing one is a broken pipeline, never a quiet skip."""
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING}.*CI=true"):
        require_driver(MISSING)
