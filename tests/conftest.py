"""Shared fixtures: one factory per saver, so engine tests run on every backend that exists."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from threadline.checkpoint import BaseSaver, InMemorySaver, SqliteSaver


def _memory(_: Path) -> BaseSaver:
    return InMemorySaver()


def _sqlite(tmp: Path) -> BaseSaver:
    return SqliteSaver(tmp / "threads.db")


ENGINE_SAVERS: dict[str, Callable[[Path], BaseSaver]] = {"memory": _memory, "sqlite": _sqlite}


@pytest.fixture(params=sorted(ENGINE_SAVERS))
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSaver]:
    """Each engine test that asks for ``saver`` runs once per backend."""
    instance = ENGINE_SAVERS[request.param](tmp_path)
    yield instance
    close = getattr(instance, "close", None)
    if close is not None:
        close()
