"""``from_url``: pick and open a saver from one string, as in config files and the CLI."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from threadline._lazy import import_with_extra
from threadline.checkpoint.base import BaseSaver
from threadline.errors import ConfigError

_SCHEMES = "memory://, sqlite:///path.db, file:///dir, postgresql://..., redis://..."


def from_url(url: str, **options: Any) -> BaseSaver:
    """The saver for ``url``; ``options`` go to its constructor (e.g. ``retention=``).

    ``sqlite:///rel.db`` is relative to the working directory, ``sqlite:////abs.db`` absolute,
    ``sqlite://:memory:`` in memory. A PostgreSQL saver is set up (tables created) before it is
    returned.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme == "memory":
        from threadline.checkpoint.memory import InMemorySaver

        return InMemorySaver(**options)
    if scheme == "sqlite":
        from threadline.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(_sqlite_path(url), **options)
    if scheme == "file":
        from threadline.checkpoint.files import FileSaver

        return FileSaver(unquote(urlsplit(url).path), **options)
    if scheme in ("postgres", "postgresql"):
        postgres = import_with_extra("threadline.checkpoint.postgres")
        saver: BaseSaver = postgres.PostgresSaver(url, **options)
        saver.setup()
        return saver
    if scheme in ("redis", "rediss"):
        redis_saver: BaseSaver = import_with_extra("threadline.checkpoint.redis").RedisSaver(
            url, **options
        )
        return redis_saver
    raise ConfigError(f"unknown checkpoint store URL {url!r}; use one of: {_SCHEMES}")


def _sqlite_path(url: str) -> str:
    rest = url.split("://", 1)[1]
    if rest in (":memory:", "/:memory:", ""):
        return ":memory:"
    if not rest.startswith("/"):
        raise ConfigError(f"write SQLite URLs as sqlite:///rel.db or sqlite:////abs.db: {url!r}")
    return unquote(rest[1:])
