"""Semantic search: LangGraph's ``index={"embed", "dims", "fields"}`` configuration, checked once.

``embed`` may be a function ``list[str] -> list[list[float]]``, an ``async`` one, an object with
LangChain's ``Embeddings`` methods (``embed_documents``/``embed_query``, and their ``a`` twins if it
has them), or a ``"provider:model"`` string that LangChain's ``init_embeddings`` resolves.
Nothing is imported from LangChain unless a string asks for it.

Every vector the function returns is checked (count, length ``dims``, finite numbers) so that a
wrong model or ``dims`` fails at the ``put`` that used it, naming what was wrong, instead of
turning later scores into nonsense.

Scores are cosine similarities, as in LangGraph: a vector of norm zero scores ``0.0``.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import operator
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from threadline.errors import InvalidStoreInputError
from threadline.store.paths import WHOLE_VALUE, Tokens, texts_at, tokenize

Vector = list[float]
FieldVectors = list[tuple[str, Vector]]
"""An item's vectors, each with the field it came from (``"text"``, ``"tags.1"``)."""

PutIndex = Literal[False] | list[str] | None

_KEYS = frozenset({"embed", "dims", "fields", "distance_type"})


class IndexConfig(TypedDict, total=False):
    """A store's ``index=`` argument, LangGraph's shape (only cosine distance is offered)."""

    dims: int
    embed: Any
    fields: list[str] | None
    distance_type: Literal["cosine"]


@dataclass(frozen=True, slots=True)
class SemanticIndex:
    """A store's parsed ``index`` configuration."""

    dims: int
    fields: tuple[tuple[str, Tokens], ...]
    embed: _Function | _Embeddings

    # -- what to embed -------------------------------------------------------------------------

    def texts(self, value: dict[str, Any], index: PutIndex) -> list[tuple[str, str]]:
        """``(field id, text)`` for each text of ``value`` that ``put(..., index=)`` selects.

        ``index=None`` uses the store's ``fields``; ``False`` embeds nothing; a list of paths
        replaces the store's fields for this item. A path selecting several texts gives ids
        ``path.0``, ``path.1``, …, as LangGraph names them.
        """
        if index is False:
            return []
        fields = self.fields if index is None else tuple((p, tokenize(p)) for p in index)
        out: list[tuple[str, str]] = []
        for path, tokens in fields:
            found = texts_at(value, path, tokens)
            if len(found) == 1:
                out.append((path, found[0]))
            else:
                out.extend((f"{path}.{i}", text) for i, text in enumerate(found))
        return out

    # -- embedding -----------------------------------------------------------------------------

    def embed_documents(self, texts: list[str]) -> list[Vector]:
        return self._check(self.embed.documents(texts), len(texts)) if texts else []

    def embed_query(self, text: str) -> Vector:
        return self._check(self.embed.query(text), 1)[0]

    async def aembed_documents(self, texts: list[str]) -> list[Vector]:
        return self._check(await self.embed.adocuments(texts), len(texts)) if texts else []

    async def aembed_query(self, text: str) -> Vector:
        return self._check(await self.embed.aquery(text), 1)[0]

    def _check(self, vectors: Any, expected: int) -> list[Vector]:
        # Any sized iterable will do (a numpy array, say), as long as there is one per text.
        got = len(vectors) if hasattr(vectors, "__len__") else type(vectors).__name__
        if got != expected or isinstance(vectors, str | bytes | Mapping):
            raise InvalidStoreInputError(
                f"the index embed function returned {got} vectors for {expected} texts"
            )
        out: list[Vector] = []
        for vector in vectors:
            floats = [float(x) for x in vector]
            if len(floats) != self.dims:
                raise InvalidStoreInputError(
                    f"the index embed function returned a vector of {len(floats)} numbers, but "
                    f"the store's index says dims={self.dims}"
                )
            if not all(math.isfinite(x) for x in floats):
                raise InvalidStoreInputError(
                    "the index embed function returned a non-finite number"
                )
            out.append(floats)
        return out


def parse_index(index: Mapping[str, Any] | None) -> SemanticIndex | None:
    """Check a store's ``index=`` argument; ``None`` (or ``{}``) means no semantic search."""
    if not index:
        return None
    if not isinstance(index, Mapping):
        raise InvalidStoreInputError(f"index must be a dict, got {type(index).__name__}")
    unknown = set(index) - _KEYS
    if unknown:
        raise InvalidStoreInputError(
            f"unsupported index option(s) {sorted(unknown)}; use embed, dims, fields"
        )
    if index.get("distance_type", "cosine") != "cosine":
        raise InvalidStoreInputError(
            f"index distance_type {index['distance_type']!r} is not supported; scores are "
            "cosine similarities (distance_type='cosine')"
        )
    dims = index.get("dims")
    if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
        raise InvalidStoreInputError(f"index dims must be a positive int, got {dims!r}")
    fields = index.get("fields") or [WHOLE_VALUE]
    if isinstance(fields, str) or not isinstance(fields, Sequence):
        raise InvalidStoreInputError(f"index fields must be a list of paths, got {fields!r}")
    return SemanticIndex(
        dims=dims,
        fields=tuple((p, () if p == WHOLE_VALUE else tokenize(p)) for p in fields),
        embed=_resolve_embed(index.get("embed")),
    )


def check_put_index(index: object) -> PutIndex:
    """Check ``put(..., index=)``: ``None``, ``False`` or a list of field paths."""
    if index is None or index is False:
        return index
    if isinstance(index, list | tuple) and all(isinstance(p, str) and p for p in index):
        for path in index:
            tokenize(path)
        return list(index)
    raise InvalidStoreInputError(
        f"put index must be False, None or a list of field paths, got {index!r}"
    )


def norm(vector: Sequence[float]) -> float:
    return math.sqrt(sum(map(operator.mul, vector, vector)))


def cosine(
    query: Sequence[float], query_norm: float, vector: Sequence[float], vector_norm: float
) -> float:
    """Cosine similarity with the norms precomputed; ``0.0`` when either norm is zero."""
    if not query_norm or not vector_norm:
        return 0.0
    dot: float = sum(map(operator.mul, query, vector))
    return dot / (query_norm * vector_norm)


def pack_vector(vector: Sequence[float]) -> bytes:
    """A vector as little-endian float64s, for backends that keep vectors as bytes."""
    return struct.pack(f"<{len(vector)}d", *vector)


class Similarity:
    """``(packed vector, its norm) -> cosine with the query``, for a SQL function to call.

    A stored vector whose length is not ``dims`` (written under another ``index``) scores
    ``None`` and is counted in ``mismatched``, so the caller can raise a clear error after the
    query instead of an opaque failure inside the database.
    """

    def __init__(self, query: Vector) -> None:
        self._query = query
        self._norm = norm(query)
        self._unpack = struct.Struct(f"<{len(query)}d").unpack
        self._size = 8 * len(query)
        self.mismatched = 0

    def __call__(self, packed: bytes, vector_norm: float) -> float | None:
        if len(packed) != self._size:
            self.mismatched += 1
            return None
        return cosine(self._query, self._norm, self._unpack(packed), vector_norm)


class _Function:
    """A plain embedding function, sync or async, behind the four calls the index makes (each
    returns a list of vectors, checked by ``SemanticIndex``)."""

    def __init__(self, fn: Callable[[list[str]], Any]) -> None:
        self.fn = fn
        self.is_async = _is_async(fn)

    def documents(self, texts: list[str]) -> Any:
        if self.is_async:
            raise InvalidStoreInputError(
                "the store's index embed function is async, so the sync store methods cannot "
                "call it: use aput/asearch, or give a sync function"
            )
        return self.fn(texts)

    def query(self, text: str) -> Any:
        return self.documents([text])

    async def adocuments(self, texts: list[str]) -> Any:
        if self.is_async:
            return await self.fn(texts)
        return await asyncio.to_thread(self.fn, texts)  # a blocking client stays off the loop

    async def aquery(self, text: str) -> Any:
        return await self.adocuments([text])


class _Embeddings:
    """An object with LangChain's ``Embeddings`` methods; its ``a*`` twins are optional."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def documents(self, texts: list[str]) -> Any:
        return self.obj.embed_documents(texts)

    def query(self, text: str) -> Any:
        return [self.obj.embed_query(text)]

    async def adocuments(self, texts: list[str]) -> Any:
        if hasattr(self.obj, "aembed_documents"):
            return await self.obj.aembed_documents(texts)
        return await asyncio.to_thread(self.obj.embed_documents, texts)

    async def aquery(self, text: str) -> Any:
        if hasattr(self.obj, "aembed_query"):
            return [await self.obj.aembed_query(text)]
        return [await asyncio.to_thread(self.obj.embed_query, text)]


def _resolve_embed(embed: object) -> _Function | _Embeddings:
    if embed is None:
        raise InvalidStoreInputError(
            "index needs 'embed': a function, an Embeddings object or a 'provider:model' string"
        )
    if isinstance(embed, str):
        try:
            from langchain.embeddings import init_embeddings  # type: ignore[import-not-found]
        except ImportError as exc:
            raise InvalidStoreInputError(
                f"index embed {embed!r} is a model name, which needs LangChain's init_embeddings "
                "(pip install langchain and the provider's package); or pass a function"
            ) from exc
        return _Embeddings(init_embeddings(embed))
    if hasattr(embed, "embed_documents") and hasattr(embed, "embed_query"):
        return _Embeddings(embed)
    if callable(embed):
        return _Function(embed)
    raise InvalidStoreInputError(
        f"index embed must be a function, an Embeddings object or a string, got {embed!r}"
    )


def _is_async(fn: object) -> bool:
    call: Callable[..., Any] | None = getattr(fn, "__call__", None)  # noqa: B004
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)
