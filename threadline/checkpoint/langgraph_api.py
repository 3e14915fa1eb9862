"""LangGraph's checkpointer API on every threadline saver.

LangGraph programs call their checkpointer directly, with a config dict:
``saver.get_tuple(config)``, ``saver.list(config, limit=1)``, ``saver.get(config)``, and read
``CheckpointTuple``s whose ``checkpoint`` is a dict (``channel_values``, ``channel_versions``...).
Threadline's own methods take a thread id and return ``CheckpointRecord``s, and both must work.

``LangGraphCheckpointerAPI`` is a base of ``BaseSaver``. When a saver class is defined it wraps
the class's own ``get_tuple``/``list``/``put``/``put_writes`` (and their ``a*`` forms) once: a
call whose first argument is a config (a mapping, or ``None`` for ``list``, or ``config=``) is
answered here in LangGraph's shapes through the saver's native methods; any other call goes
straight to the saver's method. Backends know nothing of this module.

LangGraph's low-level writes are refused with ``UnsupportedCheckpointWriteError``: a LangGraph
checkpoint dict does not say which tasks run next (threadline checkpoints plan them
explicitly), so a thread's state is changed through the graph (``update_state``) instead.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from threadline.errors import ConfigError, UnsupportedCheckpointWriteError

if TYPE_CHECKING:
    from threadline.checkpoint.base import BaseSaver, Checkpoint, CheckpointRecord, TaskWrite

__all__ = ["CheckpointTuple", "LangGraphCheckpointerAPI"]

# The ``v`` LangGraph 1.x writes in its checkpoint dicts.
CHECKPOINT_FORMAT = 4
# LangGraph's metadata keys come first in its metadata dicts, then the config's own keys.
_METADATA_FIRST = ("source", "step", "parents")
# How a write that is not a task's state update appears among LangGraph's pending writes; a
# ``breakpoint`` marker (a static interrupt) has no counterpart there and is not shown.
_WRITE_CHANNELS = {"error": "__error__", "interrupt": "__interrupt__", "resume": "__resume__"}

Config = dict[str, Any]
PendingWrite = tuple[str, str, Any]


class CheckpointTuple(NamedTuple):
    """A checkpoint as LangGraph's checkpointer API returns it."""

    config: Config
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    parent_config: Config | None = None
    pending_writes: list[PendingWrite] | None = None


# -- records to LangGraph's shapes ---------------------------------------------------------------


def checkpoint_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> Config:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def checkpoint_dict(cp: Checkpoint) -> dict[str, Any]:
    """LangGraph's checkpoint dict: the state's keys only, no LangGraph-internal channels.

    A key's version is the id of the checkpoint that last changed it, so the keys updated here
    are those whose version is this checkpoint's id. ``versions_seen`` is empty: threadline
    plans the next tasks explicitly instead of comparing versions.
    """
    return {
        "v": CHECKPOINT_FORMAT,
        "ts": cp.created_at,
        "id": cp.id,
        "channel_versions": dict(cp.versions),
        "versions_seen": {},
        "updated_channels": sorted(k for k, v in cp.versions.items() if v == cp.id),
        "channel_values": cp.values,
    }


def _metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    first = {k: metadata[k] for k in _METADATA_FIRST if k in metadata}
    return {**first, **{k: v for k, v in metadata.items() if k not in first}}


def _pending_writes(writes: Iterable[TaskWrite]) -> list[PendingWrite]:
    """``(task_id, channel, value)`` per key a task wrote, or per error/interrupt/resume."""
    pending: list[PendingWrite] = []
    for write in writes:
        if write.kind == "result":
            updates = getattr(write.value, "updates", None)
            if updates is None:  # a functional-API task's return value
                pending.append((write.task_id, "__return__", write.value))
            else:
                pending.extend((write.task_id, key, value) for key, value in updates)
        elif write.kind in _WRITE_CHANNELS:
            value = list(write.value) if write.kind == "interrupt" else write.value
            pending.append((write.task_id, _WRITE_CHANNELS[write.kind], value))
    return pending


def checkpoint_tuple(record: CheckpointRecord) -> CheckpointTuple:
    cp = record.checkpoint
    parent = cp.parent_id
    return CheckpointTuple(
        config=checkpoint_config(record.thread_id, record.checkpoint_ns, cp.id),
        checkpoint=checkpoint_dict(cp),
        metadata=_metadata(record.metadata),
        parent_config=None
        if parent is None
        else checkpoint_config(record.thread_id, record.checkpoint_ns, parent),
        pending_writes=_pending_writes(record.pending_writes),
    )


# -- reading configs -----------------------------------------------------------------------------


def _configurable(config: Any, call: str) -> Mapping[str, Any]:
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    if not isinstance(configurable, Mapping):
        raise ConfigError(
            f"{call} takes LangGraph's config, such as {{'configurable': {{'thread_id': '1'}}}}; "
            f"got {config!r} (threadline's own calls take a thread id: get_tuple(thread_id, "
            "checkpoint_ns='', checkpoint_id=None), list(thread_id, checkpoint_ns='', ...))"
        )
    return configurable


def _checkpoint_id(configurable: Mapping[str, Any]) -> str | None:
    """The addressed checkpoint (``thread_ts`` is its name in older LangGraph configs)."""
    found = configurable.get("checkpoint_id") or configurable.get("thread_ts")
    return str(found) if found else None


def _address(config: Any, method: str) -> tuple[str, str, str | None]:
    """``(thread_id, checkpoint_ns, checkpoint_id)`` of a LangGraph config."""
    configurable = _configurable(config, f"{method}(config)")
    thread_id = configurable.get("thread_id")
    if thread_id is None or thread_id == "":
        raise ConfigError(
            f"{method}(config): the config names no thread; pass "
            f"{{'configurable': {{'thread_id': '...'}}}}"
        )
    return (
        str(thread_id),
        str(configurable.get("checkpoint_ns") or ""),
        _checkpoint_id(configurable),
    )


@dataclass(frozen=True, slots=True)
class _Query:
    """A LangGraph ``list`` call, checked: which threads, namespace, checkpoint, and bounds.

    ``thread_id`` is ``None`` for every thread. Without ``checkpoint_ns`` in the config only the
    root namespace is listed (LangGraph also lists subgraphs' namespaces then).
    """

    thread_id: str | None
    checkpoint_ns: str
    checkpoint_id: str | None
    filter: Mapping[str, Any] | None
    before: str | None
    limit: int | None

    @classmethod
    def of(cls, config: Any, filter: Any, before: Any, limit: Any, method: str) -> _Query:
        thread_id, ns, checkpoint_id = (
            (None, "", None) if config is None else _address(config, method)
        )
        if filter is not None and not isinstance(filter, Mapping):
            raise ConfigError(
                f"{method}(filter=...) takes a dict of metadata values, got {filter!r}"
            )
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise ConfigError(f"{method}(limit=...) takes an int or None, got {limit!r}")
        return cls(thread_id, ns, checkpoint_id, filter, _before_id(before, method), limit)

    @property
    def empty(self) -> bool:
        return self.limit is not None and self.limit <= 0

    def keeps(self, record: CheckpointRecord) -> bool:
        """For a config naming one checkpoint: whether ``before`` and ``filter`` let it through."""
        from threadline.checkpoint.base import metadata_matches  # base imports this module

        cp_id = record.checkpoint.id
        return (self.before is None or cp_id < self.before) and metadata_matches(
            record.metadata, self.filter
        )

    def native(self) -> dict[str, Any]:
        return {"filter": self.filter, "before": self.before, "limit": self.limit}


def _before_id(before: Any, method: str) -> str | None:
    if before is None or isinstance(before, str):
        return before or None
    return _checkpoint_id(_configurable(before, f"{method}(before=...)"))


def _newest_first(
    per_thread: Iterable[list[CheckpointRecord]], limit: int | None
) -> list[CheckpointRecord]:
    """Checkpoints of several threads merged by id (creation time), newest first."""
    merged = heapq.merge(*per_thread, key=lambda r: r.checkpoint.id, reverse=True)
    return list(itertools.islice(merged, limit))


# -- LangGraph's methods, answered through the saver's native ones -------------------------------


def get_tuple(saver: BaseSaver, config: Any) -> CheckpointTuple | None:
    record = saver.get_tuple(*_address(config, "get_tuple"))
    return None if record is None else checkpoint_tuple(record)


async def aget_tuple(saver: BaseSaver, config: Any) -> CheckpointTuple | None:
    record = await saver.aget_tuple(*_address(config, "aget_tuple"))
    return None if record is None else checkpoint_tuple(record)


def list_(
    saver: BaseSaver,
    config: Any,
    *,
    filter: Mapping[str, Any] | None = None,
    before: Any = None,
    limit: int | None = None,
) -> Iterator[CheckpointTuple]:
    """LangGraph's ``list``: checked at once, then checkpoints newest first."""
    return map(checkpoint_tuple, _records(saver, _Query.of(config, filter, before, limit, "list")))


def _records(saver: BaseSaver, q: _Query) -> Iterator[CheckpointRecord]:
    if q.empty:
        return
    if q.thread_id is None:
        threads = [t.thread_id for t in saver.list_threads()]
        yield from _newest_first(
            (list(saver.list(t, q.checkpoint_ns, **q.native())) for t in threads), q.limit
        )
    elif q.checkpoint_id is not None:
        record = saver.get_tuple(q.thread_id, q.checkpoint_ns, q.checkpoint_id)
        if record is not None and q.keeps(record):
            yield record
    else:
        yield from saver.list(q.thread_id, q.checkpoint_ns, **q.native())


def alist(
    saver: BaseSaver,
    config: Any,
    *,
    filter: Mapping[str, Any] | None = None,
    before: Any = None,
    limit: int | None = None,
) -> AsyncIterator[CheckpointTuple]:
    """LangGraph's ``alist``: checked at once, then checkpoints newest first."""
    return _atuples(saver, _Query.of(config, filter, before, limit, "alist"))


async def _atuples(saver: BaseSaver, q: _Query) -> AsyncIterator[CheckpointTuple]:
    if q.empty:
        return
    if q.thread_id is None:
        per_thread = [
            [r async for r in saver.alist(t.thread_id, q.checkpoint_ns, **q.native())]
            for t in await saver.alist_threads()
        ]
        for record in _newest_first(per_thread, q.limit):
            yield checkpoint_tuple(record)
    elif q.checkpoint_id is not None:
        found = await saver.aget_tuple(q.thread_id, q.checkpoint_ns, q.checkpoint_id)
        if found is not None and q.keeps(found):
            yield checkpoint_tuple(found)
    else:
        async for record in saver.alist(q.thread_id, q.checkpoint_ns, **q.native()):
            yield checkpoint_tuple(record)


def _refuse_put(saver: BaseSaver, *args: Any, **kwargs: Any) -> Any:
    raise UnsupportedCheckpointWriteError(
        f"{type(saver).__name__}.put(config, checkpoint, metadata, new_versions) is LangGraph's "
        "low-level checkpoint write, which threadline savers do not take: a threadline "
        "checkpoint also records the tasks to run next, which LangGraph's checkpoint dict does "
        "not hold. Change a thread's state through the graph, graph.update_state(config, values, "
        "as_node=...), or copy a thread with saver.copy_thread(source_thread_id, target_thread_id)"
    )


def _refuse_put_writes(saver: BaseSaver, *args: Any, **kwargs: Any) -> Any:
    raise UnsupportedCheckpointWriteError(
        f"{type(saver).__name__}.put_writes(config, writes, task_id) is LangGraph's low-level "
        "record of a running task's channel writes, which only the graph's own run loop makes "
        "on a threadline saver. Run the graph (graph.invoke) or change its state with "
        "graph.update_state(config, values, as_node=...)"
    )


async def _arefuse_put(saver: BaseSaver, *args: Any, **kwargs: Any) -> Any:
    return _refuse_put(saver)


async def _arefuse_put_writes(saver: BaseSaver, *args: Any, **kwargs: Any) -> Any:
    return _refuse_put_writes(saver)


def _accepting_configs(native: Callable[..., Any], langgraph: Callable[..., Any]) -> Any:
    """``native``, unless called LangGraph's way (a config first, ``None``, or ``config=``).

    Native calls pass a thread id first, so one type check tells them apart; the ``a*`` forms
    return their coroutine or async iterator unawaited either way.
    """

    @functools.wraps(native)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args:
            first = args[0]
            if first is None or isinstance(first, Mapping):
                return langgraph(self, *args, **kwargs)
        elif "config" in kwargs:
            return langgraph(self, kwargs.pop("config"), **kwargs)
        return native(self, *args, **kwargs)

    return method


def _accepting_put_calls(native: Callable[..., Any], langgraph: Callable[..., Any]) -> Any:
    """``put``/``aput`` run at every step, so they tell the forms apart at almost no cost:
    the native call is ``put(record, fork=...)``; LangGraph's passes four arguments."""

    @functools.wraps(native)
    def put(self: Any, record: Any = None, /, *rest: Any, fork: bool = False, **kwargs: Any) -> Any:
        if rest or kwargs or record is None:
            return langgraph(self)
        return native(self, record, fork=fork)

    return put


# The saver methods that also take LangGraph's form: what answers that form, and how a call is
# recognised as LangGraph's.
_LANGGRAPH_FORMS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "get_tuple": (get_tuple, _accepting_configs),
    "aget_tuple": (aget_tuple, _accepting_configs),
    "list": (list_, _accepting_configs),
    "alist": (alist, _accepting_configs),
    "put": (_refuse_put, _accepting_put_calls),
    "aput": (_arefuse_put, _accepting_put_calls),
    "put_writes": (_refuse_put_writes, _accepting_configs),
    "aput_writes": (_arefuse_put_writes, _accepting_configs),
}


class LangGraphCheckpointerAPI:
    """A base of ``BaseSaver``: LangGraph's checkpointer calls, next to threadline's own."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, (langgraph, accepting) in _LANGGRAPH_FORMS.items():
            native = cls.__dict__.get(name)
            if callable(native) and not getattr(native, "__isabstractmethod__", False):
                setattr(cls, name, accepting(native, langgraph))

    def get(self, config: Mapping[str, Any]) -> dict[str, Any] | None:
        """LangGraph's ``get``: the checkpoint dict the config addresses (newest if no id)."""
        found = get_tuple(self, config)  # type: ignore[arg-type]
        return None if found is None else found.checkpoint

    async def aget(self, config: Mapping[str, Any]) -> dict[str, Any] | None:
        found = await aget_tuple(self, config)  # type: ignore[arg-type]
        return None if found is None else found.checkpoint
