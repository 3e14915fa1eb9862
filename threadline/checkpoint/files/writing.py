"""Writing a thread's files: a put's blobs and prefix rows, its preview, pending writes, and
a namespace copied by hard links. Each file is written whole and renamed into place
(``disk.write_file``); folders are fsynced once per batch."""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping, Sequence

from threadline.checkpoint.files import folders, rows
from threadline.checkpoint.files.disk import (
    TMP,
    encode_name,
    fsync_dir,
    json_bytes,
    link_or_copy,
    make_dirs,
    visible_names,
    write_file,
    write_key,
)
from threadline.checkpoint.files.preview import preview_changes
from threadline.checkpoint.layout import BlobRow, CheckpointRow, WriteRow
from threadline.serde import Serializer


def store_blobs(
    ns_dir: str,
    blobs: Sequence[BlobRow],
    prefixes: Sequence[BlobRow],
    texts: Mapping[str, bytes | None],
) -> None:
    """Write the new blobs, then replace the rows compaction turned into prefix rows.

    A stored version keeps its value whatever its form, so a new blob already on disk (from a
    put that crashed, perhaps since compacted) is skipped. Prefix rows point at the new full
    blob: it is durable before the first of them is renamed into place. They go oldest first:
    a crash midway leaves the newer versions deltas, which the next compaction still reaches.
    Renaming, not rewriting, keeps the old file intact for a copy that hard-linked it.
    """
    new = [b for b in blobs if not os.path.exists(folders.blob_path(ns_dir, b.key, b.version))]
    for batch in (new, prefixes[::-1]):
        for row in batch:
            text = texts.get(row.key) if row.data else None
            data = rows.blob_file(row, text)
            write_file(folders.blob_path(ns_dir, row.key, row.version), data, sync_dir=False)
        if batch:
            fsync_dir(os.path.join(ns_dir, "blobs"))


def copy_ns(ns_dir: str, ns: str, target_id: str, target_dir: str) -> None:
    stage = os.path.join(target_dir, f"{TMP}ns-{secrets.token_hex(6)}")
    for sub in folders.SUBFOLDERS:
        os.makedirs(os.path.join(stage, sub))
    for sub in ("checkpoints", "values", "blobs"):
        _link_all(os.path.join(ns_dir, sub), os.path.join(stage, sub))
    for cid_dir in visible_names(os.path.join(ns_dir, "writes")):
        os.mkdir(os.path.join(stage, "writes", cid_dir))
        _link_all(os.path.join(ns_dir, "writes", cid_dir), os.path.join(stage, "writes", cid_dir))
    fsync_dir(os.path.join(stage, "writes"))
    head = folders.head(ns_dir)
    if head is not None:
        write_file(os.path.join(stage, "HEAD"), json_bytes({"checkpoint_id": head}))
    info = {"thread_id": target_id, "checkpoint_ns": ns}
    write_file(os.path.join(stage, "namespace.json"), json_bytes(info))
    os.rename(stage, folders.ns_dir(target_dir, ns))


def _link_all(source: str, target: str) -> None:
    for name in visible_names(source):
        link_or_copy(os.path.join(source, name), os.path.join(target, name))
    fsync_dir(target)


def write_preview(
    ns_dir: str,
    row: CheckpointRow,
    blobs: Sequence[BlobRow],
    texts: Mapping[str, bytes | None],
    codec: Serializer,
) -> None:
    """``values/<id>.json``: what the checkpoint stored that no blob shows as JSON (nor the
    row: inline values), if anything."""
    shown = {key for key, text in texts.items() if text is not None}
    changes = preview_changes(blobs, shown, codec)
    if changes:
        doc = {"checkpoint_id": row.checkpoint_id, "step": row.step, "values": changes}
        write_file(folders.preview_path(ns_dir, row.checkpoint_id), json_bytes(doc))


def store_writes(
    ns_dir: str,
    checkpoint_id: str,
    writes: Sequence[WriteRow],
    codec: Serializer,
    formats: tuple[bool, bool],
) -> None:
    """Write files of a checkpoint's pending writes: a new one goes last; one with the key of
    a stored one replaces it in its place. ``formats``: (encrypted, values as JSON)."""
    folder = folders.writes_dir(ns_dir, checkpoint_id)
    make_dirs(folder)
    by_key: dict[str, str] = {}
    last = 0
    for name in visible_names(folder):
        seq, _, rest = name.partition("-")
        if seq.isdigit():
            last = max(last, int(seq))
            by_key[rest.rsplit("-", 1)[-1].partition(".")[0]] = name
    for w in writes:
        key = write_key(w.task_id, w.kind)
        found = by_key.get(key)
        if found is None:
            last += 1
            found = by_key[key] = f"{last:06d}-{encode_name(w.kind, 24)}-{key}.write"
        data = rows.write_file(w, codec, *formats)
        write_file(os.path.join(folder, found), data, sync_dir=False)
    fsync_dir(folder)
