"""Joining streamed ``AIMessageChunk`` pieces, as langchain-core joins its own.

Text is concatenated, content blocks and tool-call pieces with the same ``index`` are merged,
metadata dicts are merged key by key (strings joined, numbers added) and token usage is summed.
Tool calls are parsed from the joined pieces' JSON, as far as it goes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

# Keys whose values identify or date a piece: merging keeps one, never joins or adds them.
_KEEP_LAST = frozenset({"index", "created", "timestamp"})
_KEEP_SAME = frozenset({"id", "output_version", "model_provider"})
_RUN_ID_PREFIXES = ("lc_run-", "run-", "lc_")


def merge_chunks(left: Any, *others: Any) -> dict[str, Any]:
    """The fields of ``left + others[0] + ...``, for ``AIMessageChunk(**fields)``."""
    pieces = (left, *others)
    fields: dict[str, Any] = {
        "content": merge_content(left.content, *(o.content for o in others)),
        "additional_kwargs": merge_dicts(
            left.additional_kwargs, *(o.additional_kwargs for o in others)
        ),
        "response_metadata": merge_dicts(
            left.response_metadata, *(o.response_metadata for o in others)
        ),
        "tool_call_chunks": [
            {k: v for k, v in chunk.items() if k != "type"}
            for chunk in merge_lists(*(p.tool_call_chunks for p in pieces))
        ],
        "id": _best_id(p.id for p in pieces),
    }
    usages = [p.usage_metadata for p in pieces if p.usage_metadata]
    if usages:
        fields["usage_metadata"] = merge_dicts({}, *usages, add_all=True)
    if any(p.chunk_position == "last" for p in pieces):
        fields["chunk_position"] = "last"
    return fields


def _best_id(ids: Iterable[str | None]) -> str | None:
    """A provider's id wins over the ids made up for a run (``lc_run-...``)."""
    found: str | None = None
    for id_ in ids:
        if not id_:
            continue
        if not id_.startswith(_RUN_ID_PREFIXES):
            return id_
        if found is None or (id_.startswith("lc_run-") and not found.startswith("lc_run-")):
            found = id_
    return found


def merge_content(first: Any, *contents: Any) -> Any:
    """Join contents: strings concatenate, lists merge by block index."""
    merged = "" if first is None else (list(first) if isinstance(first, list) else first)
    for content in contents:
        if isinstance(merged, str):
            merged = merged + content if isinstance(content, str) else [merged, *content]
        elif isinstance(content, list):
            merged = merge_lists(merged, content)
        elif merged and isinstance(merged[-1], str):
            merged[-1] += content
        elif content != "":
            merged.append(content)
    return merged


def merge_dicts(
    left: dict[str, Any], *others: dict[str, Any], add_all: bool = False
) -> dict[str, Any]:
    """Merge metadata dicts key by key; ``add_all`` sums every number (token counts)."""
    merged = dict(left)
    for right in others:
        for key, value in right.items():
            mine: Any = merged.get(key)  # any JSON value, or None
            if key not in merged or (mine is None and value is not None):
                merged[key] = value
            elif value is None:
                continue
            elif type(mine) is not type(value):
                raise TypeError(
                    f"cannot merge {key!r}: {type(mine).__name__} and {type(value).__name__}"
                )
            elif isinstance(mine, str):
                same = key in _KEEP_SAME and mine == value
                if not same and not (key == "index" and mine.startswith("lc_")):
                    merged[key] = mine + value
            elif isinstance(mine, dict):
                merged[key] = merge_dicts(mine, value, add_all=add_all)
            elif isinstance(mine, list):
                merged[key] = merge_lists(mine, value)
            elif mine == value and not add_all:
                continue
            elif isinstance(mine, int) and not isinstance(mine, bool):
                merged[key] = value if key in _KEEP_LAST and not add_all else mine + value
            else:
                raise TypeError(f"cannot merge {key!r}: its {type(mine).__name__} values differ")
    return merged


def merge_lists(left: list[Any] | None, *others: list[Any] | None) -> list[Any]:
    """Concatenate, merging dict items that share an ``index`` (and do not disagree on id)."""
    merged = list(left or [])
    for other in others:
        for item in other or []:
            at = _same_index(merged, item)
            if at is None:
                merged.append(item)
            else:
                update = {k: v for k, v in item.items() if k != "type"}
                merged[at] = merge_dicts(merged[at], update)
    return merged


def _same_index(items: list[Any], item: Any) -> int | None:
    if not isinstance(item, dict) or not isinstance(item.get("index"), int | str):
        return None
    index, id_ = item["index"], item.get("id")
    if isinstance(index, str) and not index.startswith("lc_"):
        return None
    for at, mine in enumerate(items):
        if (
            isinstance(mine, dict)
            and mine.get("index") == index
            and (mine.get("id") in (None, "") or id_ in (None, "") or mine.get("id") == id_)
        ):
            return at
    return None


def tool_calls_of(
    chunks: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(tool_calls, invalid_tool_calls)`` parsed from tool-call pieces' JSON arguments."""
    calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for chunk in chunks:
        text = chunk.get("args")
        args = parse_partial_json(text) if text else {}
        if isinstance(args, dict):
            calls.append(
                {
                    "name": chunk.get("name") or "",
                    "args": args,
                    "id": chunk.get("id"),
                    "type": "tool_call",
                }
            )
        else:
            invalid.append(
                {
                    "name": chunk.get("name"),
                    "args": text,
                    "id": chunk.get("id"),
                    "error": None,
                    "type": "invalid_tool_call",
                }
            )
    return calls, invalid


def parse_partial_json(text: str) -> Any:
    """The JSON value ``text`` starts, closing what is still open; None if there is none."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    for end in range(len(text), 0, -1):
        try:
            return json.loads(_closed(text[:end]))
        except ValueError:
            continue
    return None


def _closed(text: str) -> str:
    """``text`` with its open string, arrays and objects closed."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and stack:
            stack.pop()
    if in_string:
        text = (text[:-1] if escaped else text) + '"'
    return text + "".join(reversed(stack))
