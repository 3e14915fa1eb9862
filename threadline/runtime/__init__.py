"""Running graphs. ``Runtime`` and ``get_runtime`` are public here, as in ``langgraph.runtime``."""

from threadline.runtime.runtime import ExecutionInfo, Runtime, get_runtime

__all__ = ["ExecutionInfo", "Runtime", "get_runtime"]
