"""The savers the conformance suite runs against: one line per backend.

A factory is a context manager called as ``factory(tmp_path, **options)``: it yields a fresh,
empty saver (its own file, directory, schema or key prefix under ``tmp_path`` or on the server)
built with ``options`` passed to the saver's constructor (the suite passes ``retention=``), and
cleans up afterwards. A backend whose server is unreachable skips inside its factory (see
``tests/services.py``).

Import it as ``from factories import SAVER_FACTORIES`` (``tests/checkpoint/`` is on
``sys.path`` for the tests in it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from toy_backend import DictRowsSaver

from threadline.checkpoint import BaseSaver, InMemorySaver, SqliteSaver

SaverFactory = Callable[..., AbstractContextManager[BaseSaver]]


@contextmanager
def memory_saver(tmp_path: Path, **options: Any) -> Iterator[BaseSaver]:
    with InMemorySaver(**options) as saver:
        yield saver


@contextmanager
def toy_saver(tmp_path: Path, **options: Any) -> Iterator[BaseSaver]:
    """``toy_backend.DictRowsBackend``: a backend written only against the protocol."""
    with DictRowsSaver(**options) as saver:
        yield saver


@contextmanager
def sqlite_saver(tmp_path: Path, **options: Any) -> Iterator[BaseSaver]:
    with SqliteSaver(tmp_path / "checkpoints.db", **options) as saver:
        yield saver


SAVER_FACTORIES: dict[str, SaverFactory] = {
    "memory": memory_saver,
    "sqlite": sqlite_saver,
    "toy": toy_saver,
    "redis": __import__("redis_fixtures").redis_saver,  # skips when Redis is unreachable
    "files": __import__("file_fixtures").file_saver,
    "postgres": __import__("postgres_fixtures").postgres_saver,  # skips when unreachable
}
