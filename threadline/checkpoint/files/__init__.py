"""A saver that keeps checkpoints as plain files: one folder per thread, JSON you can ``cat``.

Layout (``FileSaver("checkpoints")`` after one run of thread ``order-42``)::

    checkpoints/
    ├── FORMAT.json                      format marker and version (1)
    └── threads/
        └── t-order-42/                  "t-" + the percent-encoded thread id
            ├── .lock                    flock: one writing transaction at a time
            ├── thread.json              id, status, head, updated_at, next (for list_threads)
            ├── root/                    the root namespace ("" ); others are "ns-<encoded>"
            │   ├── namespace.json       the real thread id and namespace
            │   ├── HEAD                 the newest checkpoint id (a hint; see below)
            │   ├── checkpoints/<id>.json   one row per checkpoint (JSON; base64 bytes if needed)
            │   │                        and its small scalar values ("values")
            │   ├── values/<id>.json     preview of changed values no file shows, for humans
            │   ├── blobs/<key>@<version>.blob   one JSON header line, then the value (JSON)
            │   └── writes/<id>/000001-result-<hash>.write   pending writes, in order
            │                            (laid out as blob files: a header line, the value)
            └── ns-child%3Aabc/ ...

Names: ids are percent-encoded (only ``A-Z a-z 0-9 _ -`` pass through), so ``../x``, ``a/b``,
``CON``, ``""`` or unicode ids become one harmless path component; an encoding longer than
120 characters is cut and suffixed with ``~`` and a SHA-256 prefix. The real ids are stored
inside (``thread.json``, ``namespace.json``, each row), so names never have to be decoded.

What is stored: the bytes ``threadline.checkpoint.layout`` produces, exactly, each file with a
CRC-32 of them (as the other savers keep; a row's covers its id, parent, step and time too). A
row file shows the checkpoint (step, next task names, versions, metadata) as JSON, and under
``values`` the small scalars its body holds itself (``layout.inlined``: ``int``, ``float``,
``bool``, ``None``, ``str`` / ``bytes`` of at most 64 characters, changed or not). They have no
blob file: a step that only moves a counter writes its row (and ``HEAD``, ``thread.json``) and
nothing else. Where those fields make its ``body`` and ``metadata`` bytes again (``rows``: plain
metadata, no task arguments, no inline bytes, NaN or infinity, a codec that neither compresses
nor seals) that is all it holds, else it also keeps the bytes in base64. A blob file starts with
a JSON line holding its ``BlobRow`` fields (``items``: a list's length; absent in files written
before lengths were kept), size and CRC-32, then the value: as JSON (``"json": true`` in the
header) when JSON encodes back to the exact bytes, which most state (text, numbers, lists,
dicts) does, else its msgpack bytes; of a delta, only its new items. When compaction writes a
list in full again, the blobs of the versions it grew from are replaced by prefix rows: the
header line alone, its ``base`` naming the later version whose first ``items`` items they are.
A write file is laid out the same way: a JSON line with task id, name, kind, size, CRC-32 and
(unless the value follows as JSON) a readable rendering, then the value. Truncated or altered
files (an edited field or value included) raise ``SerializationError`` naming the file (and the
key, for values); other checkpoints and threads stay readable.

``values/<id>.json`` is a best-effort JSON rendering of the values a checkpoint changed that
neither a blob nor the row (inline values) shows (of a list that grew, only its new items;
long strings and collections cut short) written for people reading the folder, and only if
there is any (a run's input checkpoint changes none: its input is in its write); it is never
read back.
``FileSaver(..., previews=False)`` skips it and keeps every blob in msgpack.

Crash safety: every file is written to a ``.tmp-*`` file in its own folder, flushed, fsynced,
renamed into place with ``os.replace`` and its folder fsynced. ``put`` writes the blobs (of
values not inline), then the prefix rows that replace older blobs (once the new full blob they
point at is durable), then the preview, ``HEAD`` and the pending writes, and the row file
**last** (then ``thread.json``): a checkpoint exists once its row file does, so a crash mid-put
leaves the previous checkpoint the newest. ``HEAD`` is written before the row, so a ``HEAD``
naming a missing row means a crash: readers then scan ``checkpoints/`` instead, and the next
writer there sweeps up stray temp files and the orphaned files of the unfinished checkpoint.

Concurrency (Linux, ``fcntl.flock``): a writing transaction (a put, a put of writes, a prune, a
delete, a copy) holds the thread's ``.lock`` exclusively from its first call that names the
thread to its end, so compare-and-set ``put`` works across processes; a copy locks its two
threads in sorted order. A page of ``list`` holds it shared while it reads the page's rows,
writes and values (a prune waits, so a checkpoint is listed whole or not at all); other reads
take no lock: every file they read appears atomically. No file is modified in place (files are
written whole and renamed; rows, once there, are never rewritten, and a blob is only ever
replaced by a prefix row holding the same value), so ``copy_thread`` hard-links them.
``delete_thread`` renames the thread folder away (one atomic step) and then removes it; a load
that finds the values of its checkpoint gone with its row file reports it as not stored.

Not atomic under a crash: a ``put_writes`` batch (each write is; a crash can keep a prefix of a
batch, as if the crash came a little earlier in the step); ``thread.json`` after ``put`` or
``put_writes`` (a ``thread.json`` naming another head than the newest is stale: ``list_threads``
recomputes it, the next put rewrites it); ``copy_thread`` (namespace by namespace, the root one
last, so an interrupted copy never shows in ``list_threads``; delete the target and copy again).
Blobs of a put that crashed stay on disk until the namespace is next pruned (``prune`` or
retention); if it crashed while compacting, the versions it had already made prefix rows of its
new full blob load through that blob, which stays as long as they are kept.

Loading a long list again: the saver holds the newest chain of each value it loaded or
stored (``checkpoint.chains.HeldChains``, as SQLite and PostgreSQL do). A load whose walk meets
a held tip reads only that file's header line: if it records the CRC-32 of the bytes held,
the rows below come from the process (a version's value never changes), else the chain is let
go and the walk reads the files as it would without.

The package, by layer: ``disk.py`` (safe names, atomic and durable file writes), ``preview.py``
(the readable renderings), ``rows.py`` (what each file holds), ``folders.py`` (paths, the
thread lock, heads, crash sweeps), ``reading.py`` and ``writing.py`` (files to rows and back),
``transaction.py`` and ``backend.py`` (``FilesBackend``, the ``checkpoint.backend`` protocol)
and ``saver.py`` (``FileSaver``: ``core.CoreSaver`` over it, the folder's format version).
"""

from threadline.checkpoint.files.saver import FORMAT_VERSION, FileSaver

__all__ = ["FORMAT_VERSION", "FileSaver"]
