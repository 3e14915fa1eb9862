"""``debug=True`` and ``print_mode=``: chunks of some stream modes printed as the run goes.

As in LangGraph, ``debug=True`` (at ``compile`` or per call) prints the ``updates`` and
``values`` chunks; ``print_mode`` names the modes to print. A printed mode the caller did not
ask to stream is run for printing only: its chunks are printed and not yielded.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Sequence
from typing import Any, TypeVar

from threadline.errors import ConfigError
from threadline.graph.stream_shape import STREAM_MODES
from threadline.runtime.chunks import Emit

T = TypeVar("T")
DEBUG_MODES = frozenset({"updates", "values"})
_BOLD, _YELLOW, _RESET = "\x1b[1m", "\x1b[1;33m", "\x1b[0m"


def printed_modes(options: dict[str, Any], debug: bool) -> frozenset[str]:
    """The modes a run prints (taking ``print_mode`` and ``debug`` out of ``options``)."""
    debug = bool(options.pop("debug", None)) or debug
    asked: str | Sequence[str] = options.pop("print_mode", ())
    modes = {asked} if isinstance(asked, str) else set(asked)
    unknown = modes - set(STREAM_MODES)
    if unknown:
        raise ConfigError(f"print_mode {sorted(unknown)[0]!r} is not one of {STREAM_MODES}")
    return frozenset(modes | (DEBUG_MODES if debug else set()))


def print_chunk(item: Emit) -> None:
    """One chunk as LangGraph prints it: ``[mode]`` in bold, a subgraph's namespace in yellow."""
    parts = [f"{_BOLD}[{item.mode}]{_RESET}"]
    if item.ns:
        parts.append(f"{_YELLOW}[graph={tuple(item.ns.split('|'))}]{_RESET}")
    parts.append(repr(item.payload))
    print(" ".join(parts))


def printing(items: Iterator[T], printed: frozenset[str], streamed: frozenset[str]) -> Generator[T]:
    """``items`` with the chunks of ``printed`` modes printed, and yielded only if streamed."""
    for item in items:
        if isinstance(item, Emit) and item.mode in printed:
            print_chunk(item)
            if item.mode not in streamed:
                continue
        yield item


async def aprinting(
    items: AsyncIterator[T], printed: frozenset[str], streamed: frozenset[str]
) -> AsyncGenerator[T]:
    async for item in items:
        if isinstance(item, Emit) and item.mode in printed:
            print_chunk(item)
            if item.mode not in streamed:
                continue
        yield item
