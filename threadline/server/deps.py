"""What every route depends on: the server's state, and the caller's scope from its API key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from fastapi import Depends, HTTPException, Request

from threadline.server.auth import LOCAL_SCOPE, is_loopback, scope_of
from threadline.server.execute import Services
from threadline.server.settings import ServerSettings


class Waker(Protocol):
    """What starts a queued run: the in-process worker, or the job dispatcher of ``jobs``."""

    def wake(self) -> None: ...


@dataclass
class ServerState:
    """What the routes reach through ``request.app.state.threadline``."""

    settings: ServerSettings
    services: Services
    worker: Waker | None

    def wake(self) -> None:
        """A run was queued: the in-process worker looks at once, or its job is queued."""
        if self.worker is not None:
            self.worker.wake()


def server(request: Request) -> ServerState:
    state: ServerState = request.app.state.threadline
    return state


def _key(request: Request) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key
    bearer = request.headers.get("authorization", "")
    return bearer[7:].strip() if bearer.lower().startswith("bearer ") else None


async def owner(request: Request) -> str:
    """The scope that owns what this request creates and may see: its key's, or the local one."""
    state = server(request)
    key = _key(request)
    if key:
        scope = await state.services.db.call(lambda tx: scope_of(tx, key))
        if scope is None:
            raise HTTPException(401, "the API key is unknown or revoked")
        return scope
    host = request.client.host if request.client else None
    if state.settings.loopback_without_key and is_loopback(host):
        return LOCAL_SCOPE
    raise HTTPException(401, "an API key is required: send it in the x-api-key header")


State = Annotated[ServerState, Depends(server)]
Owner = Annotated[str, Depends(owner)]


def not_found(kind: str, ident: Any) -> HTTPException:
    return HTTPException(404, f"{kind} {ident} not found")
