"""threadline: durable, interruptible state-graph workflows.

Build a ``StateGraph``, ``compile(checkpointer=...)`` it, and every superstep is saved: runs can
stop for a human (``interrupt``), survive a crash, and be replayed or forked from any checkpoint.
"""

from threadline._lazy import lazy_attributes
from threadline.constants import END, START
from threadline.func import entrypoint, task
from threadline.graph.compiled import CompiledStateGraph
from threadline.graph.state_graph import StateGraph
from threadline.runtime.context import get_config, get_store, get_stream_writer, interrupt
from threadline.runtime.runtime import Runtime, get_runtime
from threadline.runtime.tokens import get_message_writer
from threadline.runtime.trace import TraceEntry, record_event
from threadline.types import (
    CachePolicy,
    Command,
    GraphOutput,
    Interrupt,
    Overwrite,
    RetryPolicy,
    Send,
    SnapshotTask,
    StateSnapshot,
)

# Loaded on first use: they may import langchain-core (see threadline.messages), or are
# maintenance tools most programs never call.
_LAZY = {
    "MessagesState": "threadline.messages.reducer",
    "REMOVE_ALL_MESSAGES": "threadline.messages.reducer",
    "add_messages": "threadline.messages.reducer",
    "check": "threadline.thread_check",
    "acheck": "threadline.thread_check",
    "resume_unfinished": "threadline.maintenance",
    "aresume_unfinished": "threadline.maintenance",
}

__all__ = [
    "END",
    "REMOVE_ALL_MESSAGES",
    "START",
    "CachePolicy",
    "Command",
    "CompiledStateGraph",
    "GraphOutput",
    "Interrupt",
    "MessagesState",
    "Overwrite",
    "RetryPolicy",
    "Runtime",
    "Send",
    "SnapshotTask",
    "StateGraph",
    "StateSnapshot",
    "TraceEntry",
    "acheck",
    "add_messages",
    "aresume_unfinished",
    "check",
    "entrypoint",
    "get_config",
    "get_message_writer",
    "get_runtime",
    "get_store",
    "get_stream_writer",
    "interrupt",
    "record_event",
    "resume_unfinished",
    "task",
]


__getattr__ = lazy_attributes(globals(), _LAZY)
