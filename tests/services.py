"""Where the test suite finds PostgreSQL and Redis, and what happens when one is missing.

Import it as ``from services import require_postgres`` (``tests/`` is on ``sys.path`` because
``tests/conftest.py`` lives there). URLs come from the environment, with local defaults:

    THREADLINE_TEST_POSTGRES_URL   default postgresql://root@127.0.0.1:5432/test
    THREADLINE_TEST_REDIS_URL      default redis://127.0.0.1:6379/0

``require_postgres()`` / ``require_redis()`` return the URL when the service answers. When it does
not, the test is skipped on a developer machine but fails under CI (``CI=true``), where a missing
service means a broken pipeline rather than an optional backend. Reachability is probed once per
process and remembered.
"""

from __future__ import annotations

import functools
import os

import pytest

DEFAULT_POSTGRES_URL = "postgresql://root@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
_CONNECT_TIMEOUT = 3  # seconds


def postgres_url() -> str:
    """The PostgreSQL URL tests use (``THREADLINE_TEST_POSTGRES_URL``)."""
    return os.environ.get("THREADLINE_TEST_POSTGRES_URL") or DEFAULT_POSTGRES_URL


def redis_url() -> str:
    """The Redis URL tests use (``THREADLINE_TEST_REDIS_URL``)."""
    return os.environ.get("THREADLINE_TEST_REDIS_URL") or DEFAULT_REDIS_URL


def require_postgres() -> str:
    """The PostgreSQL URL if the server answers; otherwise skip (fail under ``CI=true``)."""
    url = postgres_url()
    problem = _postgres_problem(url)
    if problem:
        _unavailable(f"PostgreSQL at {url} is unavailable: {problem}")
    return url


def require_redis() -> str:
    """The Redis URL if the server answers; otherwise skip (fail under ``CI=true``)."""
    url = redis_url()
    problem = _redis_problem(url)
    if problem:
        _unavailable(f"Redis at {url} is unavailable: {problem}")
    return url


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def _unavailable(message: str) -> None:
    if in_ci():
        pytest.fail(f"{message} (CI=true: a missing service is a failure)", pytrace=False)
    pytest.skip(f"{message}; set THREADLINE_TEST_* to point at one")


@functools.cache
def _postgres_problem(url: str) -> str | None:
    try:
        import psycopg
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        with psycopg.connect(url, connect_timeout=_CONNECT_TIMEOUT) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    return None


@functools.cache
def _redis_problem(url: str) -> str | None:
    try:
        import redis
    except ImportError as exc:
        return f"redis-py is not installed ({exc})"
    try:
        client = redis.Redis.from_url(
            url, socket_connect_timeout=_CONNECT_TIMEOUT, socket_timeout=_CONNECT_TIMEOUT
        )
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    return None
