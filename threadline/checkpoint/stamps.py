"""A checkpoint's ``created_at`` as a compact row stores it: microseconds after its id's time.

Ids are UUIDv7 (``ids.new_checkpoint_id``): their first 48 bits are the Unix millisecond they
were made in, and the loop stamps ``created_at`` (``clock.iso_at``) just after making the id.
So a row stores ``created_at`` as the microseconds from that millisecond, a small integer
(1 to 3 bytes) instead of 32 characters, and spells the same text back. A ``created_at`` that
text does not give back exactly (another form, an id that is not a UUIDv7, a time more than
``MAX_OFFSET`` from the id's) is stored as the text.
"""

from __future__ import annotations

from threadline.checkpoint.ids import id_millis
from threadline.clock import iso_at, micros_of
from threadline.errors import CorruptedDataError

#: The largest difference, in microseconds, stored as a number (about 35 minutes).
MAX_OFFSET = 2**31 - 1


def stored_created(checkpoint_id: str, created_at: str) -> int | str:
    """What a row stores for ``created_at``: its offset from the id's time when
    ``created_text`` gives it back exactly, else the text itself.

    Run at every put: the loop's ``created_at`` is most often the last text ``iso_at`` made,
    read without a parse (``micros_of``)."""
    ms = id_millis(checkpoint_id)
    if ms is None:
        return created_at
    micros = micros_of(created_at)
    if micros is None:
        return created_at
    offset = micros - ms * 1000
    return offset if -MAX_OFFSET <= offset <= MAX_OFFSET else created_at


def created_text(checkpoint_id: str, stored: int | str) -> str:
    """The ``created_at`` of a row that stores ``stored`` (see ``stored_created``).

    Run for every row read: an offset was stored only for a UUIDv7 id, so an id that now has
    no time is reported as damaged."""
    if isinstance(stored, str):
        return stored
    ms = id_millis(checkpoint_id)
    if ms is None or not -MAX_OFFSET <= stored <= MAX_OFFSET:
        raise CorruptedDataError(
            f"checkpoint {checkpoint_id} stores its creation time as an offset from its id's, "
            "but its id has no time: corrupted?"
        )
    return iso_at(ms * 1000 + stored)
