"""Requests the saver's operations yield, and sending them over a sync or an async client.

The backend's operations (``backend.py``, ``transaction.py``) are generators: they yield a
request, receive its reply and go on, so one piece of code serves ``put`` and ``aput`` alike.
This module is the only one that touches a redis-py client.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
import redis.asyncio as aredis

from threadline.checkpoint.redis.scripts import SCRIPTS, SHAS


@dataclass(frozen=True, slots=True)
class Call:
    """One Redis command, by redis-py method name."""

    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Load:
    """Load every script into the server's script cache."""


@dataclass(frozen=True, slots=True)
class Eval:
    """A script call. After a lost connection it is sent again with ``resend`` args (if any)
    unless ``once``: a script that cannot tell its own earlier run from someone else's."""

    script: str
    keys: Sequence[str]
    args: Sequence[Any]
    resend: Sequence[Any] | None = None
    once: bool = False


@dataclass(frozen=True, slots=True)
class Pipe:
    """Several calls sent together (one round trip, no transaction)."""

    calls: Sequence[Call | Eval]


Request = Call | Eval | Pipe | Load
T = TypeVar("T")
Op = Generator[Any, Any, T]
"""An operation: yields requests, receives replies, returns its result."""


def again(request: Request) -> Request | None:
    """What to send after ``request`` was lost with its connection; ``None``: give up."""
    if isinstance(request, Eval):
        if request.once:
            return None
        if request.resend is not None:
            return dataclasses.replace(request, args=request.resend)
    if isinstance(request, Pipe) and any(isinstance(c, Eval) and c.once for c in request.calls):
        return None
    return request


def send(client: redis.Redis, request: Request) -> Any:
    if isinstance(request, Call):
        return getattr(client, request.method)(*request.args, **request.kwargs)
    if isinstance(request, Load):
        return [client.script_load(src) for src in SCRIPTS.values()]
    if isinstance(request, Eval):
        return client.evalsha(SHAS[request.script], len(request.keys), *request.keys, *request.args)
    pipe = client.pipeline(transaction=False)
    for call in request.calls:
        _queue(pipe, call)
    return pipe.execute()


async def asend(client: aredis.Redis, request: Request) -> Any:
    if isinstance(request, Call):
        return await getattr(client, request.method)(*request.args, **request.kwargs)
    if isinstance(request, Load):
        return [await client.script_load(src) for src in SCRIPTS.values()]
    if isinstance(request, Eval):
        return await client.evalsha(
            SHAS[request.script], len(request.keys), *request.keys, *request.args
        )
    async with client.pipeline(transaction=False) as pipe:
        for call in request.calls:
            _queue(pipe, call)
        return await pipe.execute()


def _queue(pipe: Any, call: Call | Eval) -> None:
    if isinstance(call, Call):
        getattr(pipe, call.method)(*call.args, **call.kwargs)
    else:
        pipe.evalsha(SHAS[call.script], len(call.keys), *call.keys, *call.args)


def close_async_client(loop: asyncio.AbstractEventLoop, client: aredis.Redis) -> None:
    """Close an async client from sync code, on the loop it belongs to, if that still can be."""
    if loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        loop.create_task(client.aclose())
    elif loop.is_running():
        asyncio.run_coroutine_threadsafe(client.aclose(), loop)
    else:
        loop.run_until_complete(client.aclose())


def text(value: Any) -> str:
    """A reply as ``str`` (redis-py returns bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)
