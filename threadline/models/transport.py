"""POSTing to a chat-completions server: retries with backoff, errors that say what happened,
and server-sent events.

Retried: connection failures, timeouts, and the statuses a later attempt can fix (408, 409,
429, 5xx), after ``Retry-After`` when the server sends one (at most 60 s), else after an
exponential backoff with jitter. A stream is retried only until its reply starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import math
import random
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from threadline.errors import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
)

try:
    import httpx
except ImportError as exc:  # an optional dependency
    raise ModuleNotFoundError(
        "OpenAIChatModel needs httpx: pip install 'threadline[openai]'", name=exc.name
    ) from exc

RETRIED_STATUSES = frozenset({408, 409, 429})
INITIAL_BACKOFF = 0.5  # seconds before the first retry; doubles each time
MAX_BACKOFF = 8.0
MAX_RETRY_AFTER = 60.0
_HINTS = {
    401: " (check api_key or the OPENAI_API_KEY environment variable)",
    403: " (check api_key or the OPENAI_API_KEY environment variable)",
    404: " (check base_url, which usually ends in /v1, and the model name)",
}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how to POST: the full URL, headers, timeout and how often to retry."""

    url: str
    headers: dict[str, str]
    timeout: httpx.Timeout
    max_retries: int

    def client(self) -> httpx.Client:
        return httpx.Client(headers=self.headers, timeout=self.timeout, verify=_ssl_context())

    def async_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers=self.headers, timeout=self.timeout, verify=_ssl_context())


def timeout_of(value: float | httpx.Timeout) -> httpx.Timeout:
    return value if isinstance(value, httpx.Timeout) else httpx.Timeout(value)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every client: making one reads the CA bundle (slow)."""
    return httpx.create_ssl_context()


# ---------------------------------------------------------------------- sync
def post_json(endpoint: Endpoint, body: dict[str, Any]) -> Any:
    """The JSON reply to ``body``."""
    with endpoint.client() as client:
        response = _send(client, endpoint, body)
        with _reading(endpoint):
            response.read()
        return _json(endpoint, response.text)


def post_events(endpoint: Endpoint, body: dict[str, Any]) -> Iterator[Any]:
    """The events of a streamed reply, each a JSON value, up to ``[DONE]``."""
    with endpoint.client() as client:
        response = _send(client, endpoint, body)
        try:
            decoder = SSEDecoder(endpoint)
            with _reading(endpoint):
                for line in response.iter_lines():
                    yield from decoder.feed(line)
            decoder.finish()
        finally:
            response.close()


def _send(client: httpx.Client, endpoint: Endpoint, body: dict[str, Any]) -> httpx.Response:
    """The response to ``body``, its body not yet read, after the retries it takes."""
    attempt = 0
    while True:
        try:
            response = client.send(
                client.build_request("POST", endpoint.url, json=body), stream=True
            )
        except httpx.TransportError as exc:
            delay = _retry_after_failure(endpoint, attempt, exc)
        else:
            if response.is_success:
                return response
            response.read()
            response.close()
            delay = _retry_after_status(endpoint, attempt, response)
        attempt += 1
        time.sleep(delay)


# ---------------------------------------------------------------------- async
async def apost_json(endpoint: Endpoint, body: dict[str, Any]) -> Any:
    async with endpoint.async_client() as client:
        response = await _asend(client, endpoint, body)
        with _reading(endpoint):
            await response.aread()
        return _json(endpoint, response.text)


async def apost_events(endpoint: Endpoint, body: dict[str, Any]) -> AsyncIterator[Any]:
    async with endpoint.async_client() as client:
        response = await _asend(client, endpoint, body)
        try:
            decoder = SSEDecoder(endpoint)
            with _reading(endpoint):
                async for line in response.aiter_lines():
                    for event in decoder.feed(line):
                        yield event
            decoder.finish()
        finally:
            await response.aclose()


async def _asend(
    client: httpx.AsyncClient, endpoint: Endpoint, body: dict[str, Any]
) -> httpx.Response:
    attempt = 0
    while True:
        request = client.build_request("POST", endpoint.url, json=body)
        try:
            response = await client.send(request, stream=True)
        except httpx.TransportError as exc:
            delay = _retry_after_failure(endpoint, attempt, exc)
        else:
            if response.is_success:
                return response
            await response.aread()
            await response.aclose()
            delay = _retry_after_status(endpoint, attempt, response)
        attempt += 1
        await asyncio.sleep(delay)


# ---------------------------------------------------------------------- retry decisions
def _retry_after_failure(endpoint: Endpoint, attempt: int, exc: httpx.TransportError) -> float:
    """Seconds to wait before retrying after ``exc``; raises when no retry is left."""
    if attempt >= endpoint.max_retries:
        raise _transport_error(endpoint, exc, attempts=attempt + 1) from exc
    return backoff(attempt)


def _retry_after_status(endpoint: Endpoint, attempt: int, response: httpx.Response) -> float:
    """Seconds to wait before retrying after an error status; raises when it is final."""
    status = response.status_code
    if attempt >= endpoint.max_retries or not (status in RETRIED_STATUSES or status >= 500):
        raise http_error(endpoint, response, attempts=attempt + 1)
    told = retry_after(response.headers)
    return backoff(attempt) if told is None else told


def backoff(attempt: int) -> float:
    """Exponential backoff with jitter: about 0.5 s, 1 s, 2 s, ... up to 8 s."""
    return min(MAX_BACKOFF, INITIAL_BACKOFF * 2.0**attempt) * (1 - 0.25 * random.random())


def retry_after(headers: httpx.Headers) -> float | None:
    """The wait a server asks for (``retry-after-ms``, ``Retry-After`` in seconds or as a date),
    at most ``MAX_RETRY_AFTER``; None when it asks for none."""
    seconds: float | None = None
    if "retry-after-ms" in headers:
        seconds = _number(headers["retry-after-ms"])
        seconds = None if seconds is None else seconds / 1000
    if seconds is None and "retry-after" in headers:
        value = headers["retry-after"]
        seconds = _number(value)
        if seconds is None:
            try:
                seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError):
                return None
    return None if seconds is None else min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ---------------------------------------------------------------------- errors
def http_error(endpoint: Endpoint, response: httpx.Response, *, attempts: int) -> ModelHTTPError:
    status, said = response.status_code, server_message(response.text)
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return ModelHTTPError(
        f"POST {endpoint.url} returned {status} {response.reason_phrase}{tries}: "
        f"{said}{_HINTS.get(status, '')}",
        status=status,
        url=endpoint.url,
        server_message=said,
        body=response.text,
    )


def server_message(text: str) -> str:
    """The server's explanation in an error body: OpenAI's, vLLM's, Ollama's or llama.cpp's."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, str):
            return error
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str):
            return message
    text = text.strip()
    return (text[:500] + "...") if len(text) > 500 else (text or "(empty body)")


def _transport_error(endpoint: Endpoint, exc: httpx.TransportError, *, attempts: int) -> ModelError:
    tries = f" ({attempts} attempts)" if attempts > 1 else ""
    if isinstance(exc, httpx.TimeoutException):
        return ModelTimeoutError(
            f"POST {endpoint.url} timed out{tries} ({type(exc).__name__}; timeout "
            f"{endpoint.timeout.read} s): raise timeout= for slow models"
        )
    return ModelConnectionError(
        f"POST {endpoint.url} failed{tries}: {type(exc).__name__}: {exc or 'no details'}"
    )


@contextlib.contextmanager
def _reading(endpoint: Endpoint) -> Iterator[None]:
    """Maps a failure while reading a reply's body to the model errors (no retry: the server
    has started answering)."""
    try:
        yield
    except httpx.TransportError as exc:
        raise _transport_error(endpoint, exc, attempts=1) from exc


def _json(endpoint: Endpoint, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ModelResponseError(
            f"POST {endpoint.url} answered with a body that is not JSON ({exc}): {text[:300]!r}"
        ) from exc


class SSEDecoder:
    """Server-sent events, line by line, to the JSON values of their ``data``."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.data: list[str] = []
        self.done = False

    def feed(self, line: str) -> list[Any]:
        """The events ``line`` completes (a blank line ends one)."""
        if self.done:
            return []
        if line.startswith("data:"):
            self.data.append(line[5:].removeprefix(" "))
            return []
        if line or not self.data:  # a comment, another field, or a stray blank line
            return []
        payload, self.data = "\n".join(self.data), []
        if payload.strip() == "[DONE]":
            self.done = True
            return []
        return [_json(self.endpoint, payload)]

    def finish(self) -> None:
        """Raises unless the stream ended with ``[DONE]``: else the reply may be cut short."""
        if self.data:  # a last event without its blank line
            self.feed("")
        if not self.done:
            raise ModelResponseError(
                f"the stream from {self.endpoint.url} ended before its [DONE] event"
            )
