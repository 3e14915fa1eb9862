"""Which texts of a value get embedded: LangGraph's field paths, parsed and applied.

A path names parts of a stored value: ``"text"``, ``"metadata.title"``, ``"items[*].name"``,
``"items[0]"`` / ``"items[-1]"``, ``"*"`` (every field of an object or item of a list),
``"{title,body.text}"`` (several fields at once) and ``"$"`` (the whole value). Each text found is
embedded on its own, so an item can have several vectors; ``search`` scores it by the best.

Texts are what LangGraph embeds, so the same embedding function gives the same vectors: strings
as they are, numbers and booleans through ``str`` (``"True"``), lists and objects as JSON with
sorted keys, and ``None`` not at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from threadline.errors import InvalidStoreInputError

WHOLE_VALUE = "$"

Tokens = tuple[str, ...]


def tokenize(path: str) -> Tokens:
    """Split a path into tokens: field names, ``[index]`` and ``{a,b}`` groups.

    Raises ``ValueError`` for an empty path or an unclosed bracket, which would otherwise
    silently select nothing.
    """
    if not isinstance(path, str) or not path:
        raise InvalidStoreInputError(f"an index field path must be a non-empty string: {path!r}")
    tokens: list[str] = []
    name: list[str] = []
    i = 0
    while i < len(path):
        char = path[i]
        if char in "[{":
            if name:
                tokens.append("".join(name))
                name = []
            close = path.find("]" if char == "[" else "}", i)
            if close < 0:
                raise InvalidStoreInputError(f"index field path {path!r} has an unclosed {char!r}")
            tokens.append(path[i : close + 1])
            i = close + 1
            continue
        if char == ".":
            if name:
                tokens.append("".join(name))
                name = []
        else:
            name.append(char)
        i += 1
    if name:
        tokens.append("".join(name))
    return tuple(tokens)


def texts_at(value: dict[str, Any], path: str, tokens: Tokens) -> list[str]:
    """The texts ``path`` (already ``tokens``) selects in ``value``, in document order."""
    if path == WHOLE_VALUE:
        return [_text(value)]
    found: list[str] = []
    _collect(value, tokens, 0, found)
    return found


def _collect(obj: Any, tokens: Sequence[str], pos: int, out: list[str]) -> None:
    if pos == len(tokens):
        if obj is not None:
            out.append(_text(obj))
        return
    token = tokens[pos]
    if token.startswith("["):
        if not isinstance(obj, list):
            return
        index = token[1:-1].strip()
        if index == "*":
            for element in obj:
                _collect(element, tokens, pos + 1, out)
            return
        try:
            n = int(index)
        except ValueError:
            return
        if -len(obj) <= n < len(obj):
            _collect(obj[n], tokens, pos + 1, out)
    elif token.startswith("{"):
        if isinstance(obj, dict):
            for field in token[1:-1].split(","):
                if field.strip():
                    _collect(obj, (*tokenize(field.strip()), *tokens[pos + 1 :]), 0, out)
    elif token == "*":
        children = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else ()
        for child in children:
            _collect(child, tokens, pos + 1, out)
    elif isinstance(obj, dict) and token in obj:
        _collect(obj[token], tokens, pos + 1, out)


def _text(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict | list | tuple):
        return json.dumps(obj, sort_keys=True, ensure_ascii=False)
    return str(obj)
