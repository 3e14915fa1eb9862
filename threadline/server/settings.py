"""The server's config file: which graphs to serve, where to keep their data, who may call.

Three spellings are read: ``threadline.toml``, ``threadline.json`` and LangGraph's
``langgraph.json`` (its ``graphs`` map and ``env``; its build-only keys are reported, not used).
"""

from __future__ import annotations

import json
import logging
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadline.errors import ConfigError

log = logging.getLogger("threadline.server")

CONFIG_NAMES = ("threadline.toml", "threadline.json", "langgraph.json")
DEFAULT_DB = "sqlite:///threadline.db"
DEFAULT_BODY_LIMIT = 10 * 1024 * 1024
# langgraph.json keys that only describe how LangGraph builds its image
_BUILD_ONLY = frozenset(
    {
        "dependencies",
        "python_version",
        "node_version",
        "dockerfile_lines",
        "pip_config_file",
        "image_distro",
        "pip_installer",
        "$schema",
        "base_image",
        "keep_pkg_tools",
    }
)
_SERVER_KEYS = frozenset(
    {
        "db",
        "schema",
        "host",
        "port",
        "loopback_without_key",
        "max_body_bytes",
        "workers",
        "queue",
        "heartbeat_seconds",
        "lease_seconds",
    }
)


@dataclass(frozen=True)
class ServerSettings:
    """Everything ``threadline serve`` and ``threadline worker`` need, resolved.

    ``graphs`` maps a graph id to ``path/to/file.py:attribute`` or ``module:attribute``;
    relative paths are taken from ``base_dir`` (the config file's folder). ``db`` is a saver URL
    (``threadline.checkpoint.from_url``): it also holds the store and the server's records.
    ``loopback_without_key`` lets requests from 127.0.0.1/::1 in without an API key.
    ``workers`` is how many runs the in-process worker runs at once; ``queue`` is ``"local"``
    (runs execute inside ``serve``) or ``"procrastinate"`` (PostgreSQL; ``threadline worker``
    processes run them). ``schema`` is the PostgreSQL schema that holds all of it.
    ``lease_seconds`` is how long a silent worker keeps its runs: after it, another worker
    continues them from their last checkpoint (shorter finds a dead worker sooner; a worker
    renews its leases five times a second and beats its heart four times a lease).
    """

    graphs: Mapping[str, str]
    base_dir: Path = field(default_factory=Path.cwd)
    db: str = DEFAULT_DB
    host: str = "127.0.0.1"
    port: int = 2024
    loopback_without_key: bool = True
    max_body_bytes: int = DEFAULT_BODY_LIMIT
    workers: int = 4
    queue: str = "local"
    heartbeat_seconds: float = 10.0
    schema: str = "public"
    lease_seconds: float = 30.0

    def __post_init__(self) -> None:
        if not self.graphs:
            raise ConfigError(
                "the config lists no graphs: add a [graphs] table (name = 'file.py:attr')"
            )
        for name, spec in self.graphs.items():
            if not isinstance(spec, str) or ":" not in spec:
                raise ConfigError(
                    f"graph {name!r}: write it as 'path/to/file.py:attribute' or "
                    f"'module:attribute', got {spec!r}"
                )
        if self.queue not in ("local", "procrastinate"):
            raise ConfigError(f"queue must be 'local' or 'procrastinate', got {self.queue!r}")
        if self.queue == "procrastinate" and not self.db.startswith(
            ("postgres://", "postgresql://")
        ):
            raise ConfigError("queue = 'procrastinate' needs a PostgreSQL db URL")
        if self.lease_seconds < 1:
            raise ConfigError(f"lease_seconds must be at least 1, got {self.lease_seconds}")
        if self.workers < 1:
            raise ConfigError(f"workers must be at least 1, got {self.workers}")


def find_config(start: Path | None = None) -> Path:
    """The first of ``threadline.toml``, ``threadline.json``, ``langgraph.json`` in ``start``."""
    folder = start or Path.cwd()
    for name in CONFIG_NAMES:
        if (folder / name).is_file():
            return folder / name
    raise ConfigError(f"no {', '.join(CONFIG_NAMES)} in {folder}; pass --config PATH")


def load_settings(path: Path | str | None = None, **overrides: Any) -> ServerSettings:
    """Read a config file; ``overrides`` (from the command line or environment) win."""
    file = Path(path) if path is not None else find_config()
    raw = _read(file)
    base = file.resolve().parent
    if file.name == "langgraph.json":
        options = _from_langgraph(raw, base)
    else:
        options = _from_threadline(raw, file)
    options.update({k: v for k, v in overrides.items() if v is not None})
    return ServerSettings(base_dir=base, **options)


def _read(file: Path) -> dict[str, Any]:
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {file}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(text) if file.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{file} is not valid {file.suffix[1:].upper()}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{file} must hold an object at its top level")
    return data


def _from_threadline(raw: dict[str, Any], file: Path) -> dict[str, Any]:
    unknown = set(raw) - {"graphs", "server", "env"}
    if unknown:
        raise ConfigError(f"{file}: unknown sections {sorted(unknown)}; use graphs, server, env")
    server = raw.get("server", {})
    if not isinstance(server, dict):
        raise ConfigError(f"{file}: [server] must be a table")
    bad = set(server) - _SERVER_KEYS
    if bad:
        raise ConfigError(
            f"{file}: unknown [server] keys {sorted(bad)}; known: {sorted(_SERVER_KEYS)}"
        )
    _apply_env(raw.get("env"), file.resolve().parent)
    return {"graphs": _graphs(raw.get("graphs"), file), **server}


def _from_langgraph(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    ignored = sorted(set(raw) & _BUILD_ONLY)
    if ignored:
        log.info("langgraph.json: %s only describe LangGraph's image build; not used", ignored)
    unknown = set(raw) - _BUILD_ONLY - {"graphs", "env"}
    if unknown:
        raise ConfigError(
            f"langgraph.json: {sorted(unknown)} are not supported by threadline serve "
            "(it reads graphs and env); remove them or move to threadline.toml"
        )
    _apply_env(raw.get("env"), base)
    return {"graphs": _graphs(raw.get("graphs"), base / "langgraph.json")}


def _graphs(value: Any, file: Path) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{file}: 'graphs' must map a graph id to 'file.py:attribute'")
    graphs: dict[str, str] = {}
    for name, spec in value.items():
        # LangGraph also allows {"path": ..., "description": ...} objects
        graphs[name] = spec["path"] if isinstance(spec, dict) and "path" in spec else spec
    return graphs


def _apply_env(env: Any, base: Path) -> None:
    """``env`` is a map of variables or a dotenv file; variables already set win."""
    if env is None:
        return
    if isinstance(env, str):
        env = _dotenv(base / env)
    if not isinstance(env, dict):
        raise ConfigError("'env' must be a map of variables or the path of a .env file")
    for key, value in env.items():
        os.environ.setdefault(str(key), str(value))


def _dotenv(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the env file {path}: {exc.strerror}") from exc
    pairs = (
        line.split("=", 1) for line in lines if "=" in line and not line.lstrip().startswith("#")
    )
    return {k.strip().removeprefix("export "): v.strip().strip("'\"") for k, v in pairs}
