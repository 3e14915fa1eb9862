"""What a running node may reach, at LangGraph's ``langgraph.config`` path."""

from threadline.runtime.context import get_config, get_store, get_stream_writer

__all__ = ["get_config", "get_store", "get_stream_writer"]
