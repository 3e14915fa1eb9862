"""Values stored once when a write of the thread already holds their bytes: a run's input.

A run's input is saved as the ``__start__`` task's write of the input checkpoint, and the next
checkpoint stores the values that input set: the same bytes again (a message appended to a
list is that list's delta, a key set outright its full blob). The saver remembers the writes of
the checkpoint it just stored; a put on top of it stores such a value as its header and where
the rest is inside the write (``blobs.src_*``, see ``schema``), so the input is stored once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from threadline.checkpoint.layout import BlobRow, WriteRow
from threadline.serde import wire as fmt

MIN_BYTES = 64  # a shorter value is stored as it is: the reference would cost about as much
_PLAIN = fmt.PLAIN_HEADER


@dataclass(frozen=True, slots=True)
class Source:
    """Where a value's bytes (after its header) are: a slice of a ``result`` write."""

    checkpoint_id: str
    task_id: str
    at: int
    length: int


class RecentWrites:
    """The plain ``result`` writes of the newest checkpoint each (thread, namespace) stored."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._writes: OrderedDict[tuple[str, str], tuple[str, list[tuple[str, bytes]]]] = (
            OrderedDict()
        )

    def remember(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None:
        """Called after each put: a put without such writes forgets the thread's."""
        plain = [(w.task_id, w.data) for w in writes if w.kind == "result" and w.data[:2] == _PLAIN]
        with self._lock:
            if not plain:
                self._writes.pop((thread_id, ns), None)
                return
            self._writes[(thread_id, ns)] = (checkpoint_id, plain)
            self._writes.move_to_end((thread_id, ns))
            while len(self._writes) > self._size:
                self._writes.popitem(last=False)

    def sources(
        self, thread_id: str, ns: str, parent_id: str | None, blobs: Sequence[BlobRow]
    ) -> list[Source | None]:
        """For each blob, where a write of ``parent_id`` holds its bytes, if one does."""
        with self._lock:
            entry = self._writes.get((thread_id, ns))
        if entry is None or entry[0] != parent_id:
            return [None] * len(blobs)
        return [_find(entry[0], entry[1], blob.data) for blob in blobs]


def _find(checkpoint_id: str, writes: Sequence[tuple[str, bytes]], data: bytes) -> Source | None:
    if len(data) < 2 + MIN_BYTES or data[:2] != _PLAIN:
        return None
    body = data[2:]
    for task_id, write in writes:
        at = write.find(body, 2)
        if at >= 0:
            return Source(checkpoint_id, task_id, at, len(body))
    return None
