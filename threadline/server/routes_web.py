"""The web page (``/ui/``): static files shipped in ``threadline/server/web``, no build step.

The page is a client of the same HTTP API as any other (same API-key rules), so this module only
serves files: ``GET /ui/`` the page, ``GET /ui/<name>`` its scripts and styles, and ``GET /``
sends a browser to ``/ui/``. None of it is in the OpenAPI document.
"""

from __future__ import annotations

import re
from importlib import resources

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import RedirectResponse

router = APIRouter(include_in_schema=False)

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*\.(html|js|css|svg|txt)$")
# Everything the page loads comes from this server; nothing inline, nothing from elsewhere.
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def _file(name: str) -> Response:
    if not _NAME.match(name) or ".." in name:
        raise HTTPException(404, f"no file {name} in the web page")
    item = resources.files("threadline.server") / "web" / name
    if not item.is_file():
        raise HTTPException(404, f"no file {name} in the web page")
    suffix = name[name.rindex(".") :]
    return Response(item.read_bytes(), media_type=_TYPES[suffix], headers=_HEADERS)


@router.get("/")
async def root(request: Request) -> Response:
    """A browser asking for the server's root gets the page; an API client gets a 404."""
    if "text/html" in request.headers.get("accept", ""):
        return RedirectResponse("/ui/", status_code=307)
    raise HTTPException(404, "this is threadline's API; the web page is at /ui/")


@router.get("/ui")
async def ui_slash() -> Response:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/")
async def page() -> Response:
    return _file("index.html")


@router.get("/ui/{name}")
async def asset(name: str) -> Response:
    return _file(name)
