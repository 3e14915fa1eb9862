"""Running graphs. ``Runtime`` and ``get_runtime`` are public here, as in ``langgraph.runtime``."""

from threadline.runtime.runtime import (
    DEFAULT_RUNTIME,
    ExecutionInfo,
    RunControl,
    Runtime,
    ServerInfo,
    get_runtime,
)

__all__ = ["DEFAULT_RUNTIME", "ExecutionInfo", "RunControl", "Runtime", "ServerInfo", "get_runtime"]
