"""Shared fixtures: engine tests that take ``saver`` run once per checkpoint backend."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from threadline.checkpoint import BaseSaver

# The savers' factories live with the conformance suite (tests/checkpoint/factories.py), which
# imports its sibling modules by name; put that folder on the path however pytest was started.
sys.path.insert(0, str(Path(__file__).parent / "checkpoint"))
from factories import SAVER_FACTORIES


@pytest.fixture(params=sorted(SAVER_FACTORIES))
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSaver]:
    """A fresh, empty saver of each backend in turn (its file, schema or keys removed after)."""
    with SAVER_FACTORIES[request.param](tmp_path) as instance:
        yield instance
