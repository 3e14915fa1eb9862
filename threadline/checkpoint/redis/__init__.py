"""A saver backed by plain Redis (no modules): checkpoints shared by many processes and machines.

The package, by layer:

- ``keys.py`` — the key layout and the version marker;
- ``scripts.py`` — the Lua scripts: every write is one atomic round trip;
- ``backend.py`` — ``RedisBackend``: a put, a put of writes and a load are one script call each;
  its ``RedisTx``: history pages, pruning, copies, thread listings;
- ``connection.py`` — the clients, and the sending of the requests operations yield;
- ``saver.py`` — ``RedisSaver``: ``core.CoreSaver`` over the backend, its setup;
- ``aio.py`` — ``AsyncRedisSaver``, langgraph-redis's async name, on an async client too.

``ttl`` (seconds) applies to every key of a thread and is refreshed on every write to it; the
refresh touches each of the thread's keys, so its cost grows with the thread's history (bound
it with ``retention``). Expired threads leave their id in ``P:threads``; ``list_threads`` skips
and removes them.

Redis Cluster is not supported: ``put`` also updates the global ``P:threads``, and
``copy_thread`` spans two threads' slots.
"""

from threadline.checkpoint.redis.connection import mask_url
from threadline.checkpoint.redis.keys import SCHEMA_VERSION
from threadline.checkpoint.redis.saver import RedisSaver

__all__ = ["SCHEMA_VERSION", "RedisSaver", "mask_url"]
