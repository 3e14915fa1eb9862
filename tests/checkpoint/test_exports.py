"""What ``threadline.checkpoint`` exports, and that optional drivers load only when used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import threadline.checkpoint as checkpoint
from threadline.errors import SaverUnavailableError


@pytest.mark.parametrize(
    "name",
    ["InMemorySaver", "MemorySaver", "SqliteSaver", "FileSaver", "PostgresSaver", "RedisSaver"],
)
def test_every_saver_is_importable_from_the_package(name: str) -> None:
    saver = getattr(checkpoint, name)
    assert issubclass(saver, checkpoint.BaseSaver)
    assert name in checkpoint.__all__


def test_from_url_is_exported() -> None:
    from threadline.checkpoint import from_url

    assert from_url("memory://").__class__ is checkpoint.InMemorySaver


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchSaver"):
        _ = checkpoint.NoSuchSaver


def test_importing_the_package_loads_no_database_driver() -> None:
    code = (
        "import sys, threadline, threadline.checkpoint\n"
        "print(sorted(m for m in ('psycopg', 'redis') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


async def test_every_saver_is_an_async_context_manager(tmp_path) -> None:
    async with checkpoint.SqliteSaver(tmp_path / "a.db") as saver:
        assert await saver.aget_tuple("nobody") is None
    with pytest.raises(SaverUnavailableError, match="closed"):
        saver.get_tuple("nobody")
