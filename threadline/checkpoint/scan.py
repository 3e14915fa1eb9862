"""Finding damage: which checkpoints of a saver's threads fail their checks (``seals``).

``scan_damage(saver)`` reads every checkpoint of every thread, each on its own (its row, values
and writes), so one damaged record is reported and the rest are still read; it writes nothing.
``refuse_damaged`` lets pruning leave a damaged thread as it is, for a person to inspect.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from threadline.checkpoint.backend import RowTransaction, WholeThreads
from threadline.errors import CorruptedDataError

if TYPE_CHECKING:
    from threadline.checkpoint.base import BaseSaver
    from threadline.checkpoint.core import CoreSaver

_PAGE = 256


@dataclass(frozen=True, slots=True)
class Damage:
    """A damaged checkpoint (``checkpoint_id`` None: the thread's rows could not be listed),
    and the ``CorruptedDataError`` reading it raised (its message in ``problem``)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None
    problem: str
    error: CorruptedDataError


def scan_damage(saver: BaseSaver) -> list[Damage]:
    """Every damaged checkpoint of ``saver``'s threads, in ``list_threads`` order; empty when
    every record passes its checks. Reads everything once; writes nothing."""
    core = _core(saver)
    found: list[Damage] = []
    for info in saver.list_threads():
        found += thread_damage(core, info.thread_id)
    return found


def thread_damage(saver: CoreSaver, thread_id: str) -> list[Damage]:
    """The damaged checkpoints of one thread (every namespace; the root one on a backend that
    keeps whole threads: PostgreSQL)."""
    try:
        ids = checkpoint_ids(saver, thread_id)
    except CorruptedDataError as exc:
        return [Damage(thread_id, "", None, str(exc), exc)]
    found = []
    for ns, checkpoint_id in ids:
        try:
            saver.get_tuple(thread_id, ns, checkpoint_id)
        except CorruptedDataError as exc:
            found.append(Damage(thread_id, ns, checkpoint_id, str(exc), exc))
    return found


def checkpoint_ids(saver: CoreSaver, thread_id: str) -> builtins.list[tuple[str, str]]:
    """``(namespace, checkpoint id)`` of the thread's checkpoints, read without decoding."""
    with saver.backend.transaction(False) as tx:
        if not isinstance(saver.backend, WholeThreads):
            rows = cast(RowTransaction, tx)
            return [
                (ns, cid) for ns in rows.namespaces(thread_id) for cid, _ in rows.ids(thread_id, ns)
            ]
        found: list[tuple[str, str]] = []
        before = None
        while page := tx.page(thread_id, "", before, _PAGE):
            found += [("", stored.row.checkpoint_id) for stored in page]
            before = page[-1].row.checkpoint_id
        return found


def refuse_damaged(saver: CoreSaver, thread_id: str) -> None:
    """Raise ``CorruptedDataError`` if a checkpoint row of the thread fails its check, before
    pruning deletes any. A backend that prunes whole threads (PostgreSQL) is not asked: it
    prunes in one round trip by the blob names it keeps in the clear, decoding nothing, and
    ``maintenance.prune`` skips the threads ``list_threads`` lists as damaged."""
    if isinstance(saver.backend, WholeThreads):
        return
    with saver.backend.transaction(False) as rows:
        for ns in rows.namespaces(thread_id):
            for cid, body in rows.bodies(thread_id, ns):
                saver.checked_body(thread_id, ns, cid, body)


def _core(saver: BaseSaver) -> CoreSaver:
    from threadline.checkpoint.core import CoreSaver

    if not isinstance(saver, CoreSaver):
        raise TypeError(f"scan_damage reads threadline's savers, not {type(saver).__name__}")
    return saver
