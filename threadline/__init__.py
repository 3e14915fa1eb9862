"""threadline: durable, interruptible state-graph workflows.

Build a ``StateGraph``, ``compile(checkpointer=...)`` it, and every superstep is saved: runs can
stop for a human (``interrupt``), survive a crash, and be replayed or forked from any checkpoint.
"""

from threadline.constants import END, START
from threadline.graph.compiled import CompiledStateGraph
from threadline.graph.state_graph import StateGraph
from threadline.runtime.context import get_config, get_store, get_stream_writer, interrupt
from threadline.runtime.tokens import get_message_writer
from threadline.types import (
    Command,
    Interrupt,
    Overwrite,
    RetryPolicy,
    Send,
    SnapshotTask,
    StateSnapshot,
)

__all__ = [
    "END",
    "START",
    "Command",
    "CompiledStateGraph",
    "Interrupt",
    "Overwrite",
    "RetryPolicy",
    "Send",
    "SnapshotTask",
    "StateGraph",
    "StateSnapshot",
    "get_config",
    "get_message_writer",
    "get_store",
    "get_stream_writer",
    "interrupt",
]
