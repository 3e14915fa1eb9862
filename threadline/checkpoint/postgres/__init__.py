"""A saver backed by PostgreSQL (psycopg 3), for many processes and machines sharing threads.

Tables (in ``schema``, all named ``threadline_*``; DDL in ``schema.py``):

- ``heads``: one row per (thread, namespace) naming its newest checkpoint. ``put`` is a
  compare-and-set on this row (``threadline_advance_head``, the rule of ``rules.check_put``):
  it moves only from the checkpoint the new one was computed from (anywhere for a fork), and
  only to an id that sorts after it. Root-namespace rows also keep the planned task names and
  the time of the last change, so they serve ``list_threads`` (the "threads table"; sorted by
  that time with no index, so a put's update of its head is HOT).
- ``checkpoints``: the checkpoint without its values (``layout.encode_record``, a compact body
  without what the row's columns hold; it holds the small scalars, ``layout.inlined``), its
  encoded metadata, and the ``(key, version)`` of every other value in the clear, so loading
  fetches blobs and chains, and pruning finds unused blobs, in SQL without decoding anything.
- ``blobs``: one immutable row per stored value (full, or a delta on a list), keyed by
  (thread, namespace, key, version), with a CRC-32 of its bytes checked on load.
- ``writes``: pending writes, in insertion order (``seq``).
- ``schema_version`` (1).

Round trips: ``put`` is one statement, a call of the server-side function ``threadline_put``
with two parameters (its fields as JSON, its bytes): in autocommit, one round trip and one
transaction. A sync put alone goes straight to libpq (``connections.Hot``); concurrent ``aput``s on
one event loop go together as one ``threadline_put_many`` call (``batcher``); with retention,
the prune follows the put in the same pipeline, inside ``BEGIN`` / ``COMMIT``. A load
(``get_tuple``, a page of ``list``) is one statement returning the checkpoints, their writes
and their blobs, so one snapshot. Other operations send their statements in pipeline mode with
their ``BEGIN`` and ``COMMIT``: one round trip and one transaction each. ``put`` takes one more
when the core's metadata cache misses a base a list delta needs, and is retried once, storing
values in full, if values it relies on are not stored. Sync methods run on a
``psycopg_pool.ConnectionPool``; ``aput``, ``aget_tuple`` and ``aput_writes`` are native async
on an ``AsyncConnectionPool`` per event loop (the other ``a*`` methods run the sync ones on a
worker thread); calls run concurrently up to the pool size, and puts on one thread wait only for
each other, on its head row.

Every value goes into SQL as a bound parameter; metadata filters are applied in Python after
decoding, so a filter key never reaches SQL.

Modules: ``saver`` (``PostgresSaver``), ``aio`` (``AsyncPostgresSaver``), ``backend`` (puts,
loads, whole threads, the core's read transaction), ``batcher`` (many ``aput``s in one call),
``rows`` (what is stored, values stored inside the input's write), ``connections`` (operations,
the driver, errors), ``pools`` (a URL's pools, the program's connections), ``schema`` (tables,
functions, version) and ``statements`` (SQL).
"""

from threadline.checkpoint.postgres.connections import mask_url
from threadline.checkpoint.postgres.saver import PostgresSaver
from threadline.checkpoint.postgres.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "PostgresSaver", "mask_url"]
