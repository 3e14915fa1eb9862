"""Best-effort JSON renderings of values, written next to the exact bytes for people to read:
the fields of row and write files, and ``values/<id>.json``.

Never read back: a value that cannot be rendered shows as an error marker, and a save goes on.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import date, datetime
from datetime import time as dtime
from typing import Any

from threadline.checkpoint.files import disk
from threadline.checkpoint.layout import BlobRow, CheckpointRow
from threadline.errors import SerializationError
from threadline.serde import Serializer

# Characters of a string shown: enough to tell what it is about (the value itself is in the
# blob). Longer previews made them the largest part of a long conversation's folder.
_MAX_STR = 240
_MAX_ITEMS = 100
_MAX_DEPTH = 16
_MAX_NODES = 5000  # values rendered per state key (or metadata, or write)
_MAX_PREVIEW = 64 * 1024  # characters of JSON per state key in values.json


def _render(obj: Any, budget: list[int] | None = None, depth: int = 0) -> Any:
    """Best-effort JSON rendering of a value, for people; never read back.

    Strings and collections are cut short, and at most ``_MAX_NODES`` values are rendered.
    """
    if budget is None:
        budget = [_MAX_NODES]
    budget[0] -= 1
    if obj is None or isinstance(obj, bool | int):
        return obj
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else repr(obj)
    if isinstance(obj, str):
        return obj if len(obj) <= _MAX_STR else f"{obj[:_MAX_STR]}… ({len(obj)} characters)"
    if isinstance(obj, bytes | bytearray | memoryview):
        return f"<{len(obj)} bytes>"
    if depth >= _MAX_DEPTH or budget[0] < 0:
        return "…"
    if isinstance(obj, enum.Enum):
        return f"{type(obj).__name__}.{obj.name}"
    if isinstance(obj, datetime | date | dtime):
        return obj.isoformat()
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for i, (k, v) in enumerate(obj.items()):
            if i >= _MAX_ITEMS or budget[0] < 0:
                out["…"] = f"{len(obj) - i} more entries"
                break
            out[k if isinstance(k, str) else repr(k)] = _render(v, budget, depth + 1)
        return out
    if isinstance(obj, list | tuple | set | frozenset):
        items = list(obj)
        if isinstance(obj, set | frozenset):
            items.sort(key=repr)
        rendered = []
        for i, x in enumerate(items):
            if i >= _MAX_ITEMS or budget[0] < 0:
                rendered.append(f"… {len(items) - i} more items")
                break
            rendered.append(_render(x, budget, depth + 1))
        return rendered
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {
            f.name: _render(getattr(obj, f.name, None), budget, depth + 1)
            for f in dataclasses.fields(obj)
        }
        return {"$type": type(obj).__qualname__, **fields}
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        with suppress(Exception):
            return {"$type": type(obj).__qualname__, **_render(dump(), budget, depth + 1)}
    try:
        text = repr(obj)
    except Exception:
        text = f"<{type(obj).__qualname__}>"
    return {"$repr": _render(text, budget)}


def safe_render(obj: Any) -> Any:
    try:
        return _render(obj)
    except Exception as exc:  # a preview must never stop a save
        return {"$error": f"cannot render: {type(exc).__name__}"}


def write_preview(
    ns_dir: str,
    row: CheckpointRow,
    blobs: Sequence[BlobRow],
    texts: Mapping[str, bytes | None],
    codec: Serializer,
) -> None:
    """``values/<id>.json``, if the checkpoint stored anything that no blob shows as JSON
    (``texts``) nor the row (inline values): of a list stored as a delta, only its new items.

    A preview of every value at every checkpoint would repeat a long conversation at each step
    and outweigh the stored values many times over.
    """
    out: dict[str, Any] = {}
    for blob in sorted((b for b in blobs if texts.get(b.key) is None), key=lambda b: b.key):
        try:
            value = codec.loads(blob.data)
        except SerializationError as exc:
            out[blob.key] = {"$error": f"cannot render: {type(exc).__name__}"}
            continue
        if blob.base is not None:
            rendered: Any = {"$appended": safe_render(value), "$length": blob.items}
        else:
            rendered = safe_render(value)
        text = json.dumps(rendered, ensure_ascii=False)
        if len(text) > _MAX_PREVIEW:
            rendered = {"$truncated": f"{len(text)} characters", "head": text[:_MAX_STR]}
        out[blob.key] = rendered
    if out:
        doc = {"checkpoint_id": row.checkpoint_id, "step": row.step, "values": out}
        # Never read back: one lost in a power failure costs nothing.
        disk.write_json(disk.preview_path(ns_dir, row.checkpoint_id), doc, durable=False)
