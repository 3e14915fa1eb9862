"""How a run's chunks reach the caller: LangGraph's v1 shapes (a payload, ``(mode, payload)``,
with the namespace first under ``subgraphs=True``) or its v2 parts (``{"type", "ns", "data"}``);
and a subgraph run's chunks handed to the caller streaming its parent."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Sequence
from typing import Any

from threadline.constants import INTERRUPT_KEY
from threadline.errors import ConfigError
from threadline.runtime.chunks import Emit
from threadline.runtime.drivers import Done

STREAM_MODES = ("values", "updates", "checkpoints", "tasks", "debug", "messages", "custom")
STREAM_VERSIONS = ("v1", "v2")


def stream_shape(
    stream_mode: str | Sequence[str] | None,
    options: dict[str, Any],
    as_output: Callable[[Any], Any],
) -> tuple[frozenset[str], Callable[[Emit], Any]]:
    """The modes asked for, and how each chunk is shaped for the caller."""
    stream_mode = "updates" if stream_mode is None else stream_mode
    single = isinstance(stream_mode, str)
    modes = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode)
    for mode in modes:
        if mode not in STREAM_MODES:
            raise ConfigError(f"stream_mode {mode!r} is not one of {STREAM_MODES}")
    if take_version(options) == "v2":
        return frozenset(modes), functools.partial(_part, as_output=as_output)
    subgraphs = bool(options.get("subgraphs"))
    return frozenset(modes), functools.partial(_chunk, single=single, subgraphs=subgraphs)


def take_version(options: dict[str, Any]) -> str:
    """The output format asked for (taken out of ``options``): LangGraph's v1 or v2."""
    version: str = options.pop("version", "v1")
    if version not in STREAM_VERSIONS:
        raise ConfigError(f"version must be one of {STREAM_VERSIONS}, got {version!r}")
    return version


def _chunk(item: Emit, single: bool, subgraphs: bool) -> Any:
    """A stream chunk as LangGraph shapes it: the namespace first when subgraphs are streamed."""
    if not subgraphs:
        return item.payload if single else (item.mode, item.payload)
    ns = _namespace(item)
    return (ns, item.payload) if single else (ns, item.mode, item.payload)


def _part(item: Emit, as_output: Callable[[Any], Any]) -> dict[str, Any]:
    """A ``version="v2"`` stream part; a ``values`` part holds its interrupts apart, and the
    graph's own values come as its output type (a dataclass or pydantic model one)."""
    if item.mode != "values":
        return {"type": item.mode, "ns": _namespace(item), "data": item.payload}
    data = dict(item.payload)
    interrupts = tuple(data.pop(INTERRUPT_KEY, ()))
    if not item.ns:
        data = as_output(data)
    return {"type": "values", "ns": _namespace(item), "data": data, "interrupts": interrupts}


def _namespace(item: Emit) -> tuple[str, ...]:
    return tuple(item.ns.split("|")) if item.ns else ()


def forwarded(
    items: Iterator[Emit | Done], sink: Callable[[Emit], None], ns: str
) -> Generator[Emit | Done]:
    """A subgraph run's chunks go to the streaming caller, tagged with the subgraph's namespace."""
    for item in items:
        if isinstance(item, Emit):
            sink(Emit(item.mode, item.payload, ns))
        else:
            yield item


async def aforwarded(
    items: AsyncIterator[Emit | Done], sink: Callable[[Emit], None], ns: str
) -> AsyncGenerator[Emit | Done]:
    async for item in items:
        if isinstance(item, Emit):
            sink(Emit(item.mode, item.payload, ns))
        else:
            yield item
