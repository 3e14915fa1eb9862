"""The ASGI application: LangGraph Server's HTTP API over threadline graphs.

``create_app(settings)`` opens the saver, store and records at start-up and, with the local
queue, runs a worker in the same process; with Procrastinate, it queues jobs for the
``threadline worker`` processes and runs nothing itself. ``serve(settings)`` runs it with uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from threadline import errors
from threadline.server import (
    routes_assistants,
    routes_runs,
    routes_store,
    routes_threads,
    routes_trace,
)
from threadline.server.deps import ServerState
from threadline.server.events import relay_notifications
from threadline.server.limits import BodyLimit
from threadline.server.routes_web import router as web_router
from threadline.server.services import close_services, open_services
from threadline.server.settings import ServerSettings
from threadline.server.worker import LocalWorker

if TYPE_CHECKING:
    from threadline.server import jobs

log = logging.getLogger("threadline.server")
VERSION = "0.1.0"

# Library errors a client caused, and the HTTP status each means
_CLIENT_ERRORS: list[tuple[type[Exception], int]] = [
    (errors.ThreadNotFoundError, 404),
    (errors.CheckpointNotFoundError, 404),
    (errors.ConcurrentUpdateError, 409),
    (errors.NothingToResumeError, 409),
    (errors.InvalidResumeError, 422),
    (errors.InvalidUpdateError, 422),
    (errors.GraphValidationError, 422),
    (errors.ConfigError, 422),
    (errors.InvalidStoreInputError, 422),
    (errors.InvalidSchemaError, 422),
    (errors.SerializationError, 422),
    (ValueError, 422),
]


def create_app(settings: ServerSettings) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        services = open_services(settings)
        worker: LocalWorker | jobs.JobDispatcher
        if settings.queue == "local":
            worker = LocalWorker(services, settings.workers)
            worker.start()
        else:  # runs become Procrastinate jobs; `threadline worker` processes run them
            from threadline.server import jobs

            worker = jobs.JobDispatcher(settings, services.db)
            await worker.start()
        app.state.threadline = ServerState(settings, services, worker)
        relay = None
        if services.db.postgres:  # workers may be other processes: hear them at once
            bus = services.bus
            relay = asyncio.create_task(relay_notifications(settings.db, bus))
        try:
            yield
        finally:
            if relay is not None:
                relay.cancel()
                await asyncio.gather(relay, return_exceptions=True)
            await worker.stop()
            close_services(services)

    app = FastAPI(
        title="threadline",
        version=VERSION,
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load their scripts from a CDN; the API stays offline
        redoc_url=None,
        description="LangGraph Server's API over threadline graphs.",
    )
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    _errors(app)
    app.add_api_route("/ok", _ok, methods=["GET"], tags=["system"])
    app.add_api_route("/info", _info, methods=["GET"], tags=["system"])
    for module in (routes_assistants, routes_threads, routes_trace, routes_runs, routes_store):
        app.include_router(module.router)
    app.include_router(web_router)
    return app


async def _ok() -> dict[str, bool]:
    return {"ok": True}


async def _info() -> dict[str, Any]:
    return {
        "version": VERSION,
        "server": "threadline",
        "flags": {"assistants": True, "crons": False, "langsmith": False},
    }


def _errors(app: FastAPI) -> None:
    """Every failure is a JSON ``{"detail": ...}``; no stack trace ever reaches a client."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        # ``message`` names each field in one line: what langgraph-sdk's errors show
        message = "; ".join(
            f"{'.'.join(str(part) for part in p['loc'])}: {p['msg']}" for p in problems
        )
        return JSONResponse({"detail": problems, "message": message}, 422)

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> JSONResponse:
        for kind, status in _CLIENT_ERRORS:
            if isinstance(exc, kind):
                return JSONResponse({"detail": f"{type(exc).__name__}: {exc}"}, status)
        log.exception("%s %s failed", request.method, request.url.path)
        return JSONResponse(
            {"detail": "internal server error; the server's log has the cause"}, 500
        )


def serve(settings: ServerSettings) -> None:
    """Run the server with uvicorn until interrupted (``threadline serve``)."""
    import uvicorn

    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="info")
