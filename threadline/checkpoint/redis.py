"""A saver backed by plain Redis (no modules): checkpoints shared by many processes and machines.

Layout (``P`` is the prefix; ``T`` = ``P:{t:<thread>}``, whose hash tag puts every key of one
thread in one slot; thread ids, namespaces, state keys and versions are percent-encoded in key
names, and the real ids are kept in the data)::

    P:schema_version             string: the layout version of everything under P
    P:threads                    zset: thread id -> last update (µs), for list_threads
    T:meta                       hash: root-namespace head, status, next task names, updated_at
    T:keys                       set: the suffix (after T) of every other key of the thread
    T:ns                         set: the thread's namespaces
    T:idx:<ns>                   zset: checkpoint ids, all scored 0, so ordered by id
    T:cp:<ns>:<id>               hash: the checkpoint row (body, metadata, parent_id, ...)
    T:w:<ns>:<id>                hash: pending writes (d:<kind>:<task> data, n:<kind>:<task> name)
    T:wo:<ns>:<id>               list: <kind>:<task> of the writes, in insertion order
    T:b:<ns>:<key>:<version>     hash: one value blob (layout.BlobRow: metadata and data, and
                                 for a delta ``base_ref``, the key suffix of its base)

Every ``put`` is one Lua script (one round trip): it checks that the parent is still the newest
checkpoint of its (thread, namespace) and that the new id sorts after it — compare-and-set —
and then writes the row, the new blobs (immutable: an existing blob is never rewritten), the
pending writes, the indexes, the thread's status and the TTLs; or it writes nothing and reports
the newest checkpoint, which ``put`` raises as ``ConcurrentUpdateError``. Reading a checkpoint
with its writes and every blob of its values is one script too, following each delta's
``base_ref`` down to its chain's full blob; ``list`` reads a page of ids, then the page's
checkpoints in one pipeline.

A delta is encoded against its base's metadata (``layout.BaseLookup``), which the saver caches
per (thread, namespace, key, version) from what it wrote and read; a miss costs one ``HMGET``
before the put. The script refuses a delta whose base has gone (pruned or deleted by another
process) and a checkpoint naming a value that is not stored; the saver then stores those values
in full and sends the put again.

redis-py's automatic retries are turned off: after a broken connection the saver sends a request
again itself (up to three times), and a ``put`` goes again flagged as resent, so that finding its
own checkpoint already saved (same id, same bytes) counts as success, not as a conflict.

``ttl`` (seconds) applies to every key of a thread and is refreshed on every write to it; the
refresh touches each of the thread's keys, so its cost grows with the thread's history (bound
it with ``retention``). Expired threads leave their id in ``P:threads``; ``list_threads`` skips
and removes them.

Redis Cluster is not supported: ``put`` also updates the global ``P:threads``, and
``copy_thread`` spans two threads' slots.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry as SyncRetry

from threadline import serde
from threadline.checkpoint.base import (
    BaseSaver,
    CheckpointRecord,
    Retention,
    StorageHints,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
    metadata_matches,
)
from threadline.checkpoint.layout import (
    BlobRow,
    EncodedCheckpoint,
    WriteRow,
    assemble_values,
    chains_needed,
    decode_metadata,
    decode_write,
    encode_record,
    encode_writes,
    referenced_blobs,
    wanted_blobs,
)
from threadline.errors import (
    ConcurrentUpdateError,
    SaverUnavailableError,
    SerializationError,
)

__all__ = ["SCHEMA_VERSION", "RedisSaver"]

#: The version of the key layout; a store written by a newer layout is refused.
SCHEMA_VERSION = 1

_PAGE = 64  # checkpoints (or threads) read per round trip when listing
_CACHE_SIZE = 20_000  # blob metadata entries kept for delta encoding
_PRUNE_ATTEMPTS = 5
_PUT_ATTEMPTS = 4
_SEND_ATTEMPTS = 3  # a request whose connection broke is sent again (idempotent ones only)
_SEND_BACKOFF = 0.05  # seconds, doubled after each failure

# --------------------------------------------------------------------------------- Lua scripts
# Helpers shared by the scripts that write. ``refresh`` re-arms the TTL of every key of a
# thread; ``status_of`` is ``base.thread_status`` over the write fields (``d:<kind>:<task>``).
_LUA_COMMON = r"""
local function refresh(tag, reg, ttl)
  if ttl > 0 then
    for _, s in ipairs(redis.call('SMEMBERS', reg)) do
      redis.call('PEXPIRE', tag .. s, ttl)
    end
    redis.call('PEXPIRE', reg, ttl)
  end
end

local function status_of(whash, has_next)
  if has_next ~= '1' then return 'idle' end
  local finished, entries = {}, {}
  for _, f in ipairs(redis.call('HKEYS', whash)) do
    if string.sub(f, 1, 2) == 'd:' then
      local rest = string.sub(f, 3)
      local i = string.find(rest, ':', 1, true)
      local kind, task = string.sub(rest, 1, i - 1), string.sub(rest, i + 1)
      if kind == 'result' then finished[task] = true end
      entries[#entries + 1] = {kind, task}
    end
  end
  local err, intr = false, false
  for _, e in ipairs(entries) do
    if not finished[e[2]] then
      if e[1] == 'error' then err = true
      elseif e[1] == 'interrupt' or e[1] == 'breakpoint' then intr = true end
    end
  end
  if err then return 'error' elseif intr then return 'interrupted' end
  return 'running'
end

local function store_writes(tag, reg, qns, cid, first, n)
  if n == 0 then return end
  local ws, wos = ':w:' .. qns .. ':' .. cid, ':wo:' .. qns .. ':' .. cid
  local wk, wo = tag .. ws, tag .. wos
  for i = 0, n - 1 do
    local a = first + i * 3
    local id = ARGV[a]
    if redis.call('HEXISTS', wk, 'd:' .. id) == 0 then redis.call('RPUSH', wo, id) end
    redis.call('HSET', wk, 'd:' .. id, ARGV[a + 2], 'n:' .. id, ARGV[a + 1])
  end
  redis.call('SADD', reg, ws, wos)
end
"""

# KEYS: registry, global threads zset.
# ARGV: 1 tag, 2 ns, 3 qns, 4 id, 5 parent, 6 has_parent, 7 fork, 8 thread_id, 9 ttl_ms,
# 10 score, 11 updated_at, 12 has_next, 13 next, 14 step, 15 created_at, 16 body, 17 metadata,
# 18 blob refs, 19 n_blobs, 20 n_bases, 21 n_writes, 22 resent; then 9 per blob (suffix, key,
# version, start, base, chain_bytes, full_bytes, data, and for a delta the suffix of its base),
# one per base that must exist (suffix), 3 per write (id, task_name, data).
# Replies {'ok', count, oldest created_at, blobs that existed}, {'conflict', head, moved},
# {'nobase', suffix} or {'missing', {suffixes}}; only 'ok' has written anything.
_LUA_PUT = (
    _LUA_COMMON
    + r"""
local tag, ns, qns, cid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local reg, threads = KEYS[1], KEYS[2]
local idx_s, row_s = ':idx:' .. qns, ':cp:' .. qns .. ':' .. cid
local idx, row = tag .. idx_s, tag .. row_s

local function summary(existed)
  local oldest = redis.call('ZRANGE', idx, 0, 0)[1]
  return {'ok', redis.call('ZCARD', idx),
          redis.call('HGET', tag .. ':cp:' .. qns .. ':' .. oldest, 'created_at'), existed}
end

local head = redis.call('ZREVRANGE', idx, 0, 0)[1]
local moved = false
if ARGV[7] ~= '1' then
  if ARGV[6] == '1' then moved = head ~= ARGV[5] else moved = head ~= nil end
end
-- the new checkpoint must become the newest: checkpoints are never replaced (ZRANGEBYLEX
-- compares bytes, as ids sort; Lua's own comparison would follow the server's locale)
local behind = head ~= nil and #redis.call('ZRANGEBYLEX', idx, '[' .. cid, '+', 'LIMIT', 0, 1) > 0
if moved or behind then
  if ARGV[22] == '1' and head == cid and redis.call('HGET', row, 'body') == ARGV[16] then
    return summary({})  -- this very put, sent again after its reply was lost: it is saved
  end
  return {'conflict', head or '', moved and '1' or '0'}
end

local nb, nbase, nw = tonumber(ARGV[19]), tonumber(ARGV[20]), tonumber(ARGV[21])
local first_base = 23 + nb * 9
for i = 0, nbase - 1 do
  local s = ARGV[first_base + i]
  if redis.call('EXISTS', tag .. s) == 0 then return {'nobase', s} end
end
-- every value the checkpoint names must be stored already or come with it
local new, missing = {}, {}
for i = 0, nb - 1 do new[ARGV[23 + i * 9]] = true end
for s in string.gmatch(ARGV[18], '[^\n]+') do
  if not new[s] and redis.call('EXISTS', tag .. s) == 0 then missing[#missing + 1] = s end
end
if #missing > 0 then return {'missing', missing} end

redis.call('DEL', row)
local f = {'checkpoint_id', cid, 'step', ARGV[14], 'created_at', ARGV[15], 'body', ARGV[16],
           'metadata', ARGV[17], 'blobs', ARGV[18]}
if ARGV[6] == '1' then f[#f + 1] = 'parent_id'; f[#f + 1] = ARGV[5] end
redis.call('HSET', row, unpack(f))
redis.call('ZADD', idx, 0, cid)
redis.call('SADD', tag .. ':ns', ns)
redis.call('SADD', reg, ':ns', idx_s, row_s)

local existed = {}
for i = 0, nb - 1 do
  local a = 23 + i * 9
  local s = ARGV[a]
  local bk = tag .. s
  if redis.call('EXISTS', bk) == 1 then
    existed[#existed + 1] = s
  else
    local b = {'key', ARGV[a + 1], 'version', ARGV[a + 2], 'start', ARGV[a + 3],
               'chain_bytes', ARGV[a + 5], 'full_bytes', ARGV[a + 6], 'data', ARGV[a + 7]}
    if ARGV[a + 8] ~= '' then
      b[#b + 1] = 'base'; b[#b + 1] = ARGV[a + 4]
      b[#b + 1] = 'base_ref'; b[#b + 1] = ARGV[a + 8]
    end
    redis.call('HSET', bk, unpack(b))
    redis.call('SADD', reg, s)
  end
end

store_writes(tag, reg, qns, cid, first_base + nbase, nw)

if ns == '' and redis.call('ZREVRANGE', idx, 0, 0)[1] == cid then
  local meta = tag .. ':meta'
  redis.call('HSET', meta, 'thread_id', ARGV[8], 'checkpoint_id', cid,
             'status', status_of(tag .. ':w:' .. qns .. ':' .. cid, ARGV[12]),
             'has_next', ARGV[12], 'next', ARGV[13], 'updated_at', ARGV[11])
  redis.call('SADD', reg, ':meta')
  redis.call('ZADD', threads, tonumber(ARGV[10]), ARGV[8])
end
refresh(tag, reg, tonumber(ARGV[9]))
return summary(existed)
"""
)

# KEYS: registry, global threads zset.
# ARGV: 1 tag, 2 ns, 3 qns, 4 id, 5 thread_id, 6 ttl_ms, 7 score, 8 updated_at, 9 n_writes,
# then 3 per write (id, task_name, data).
_LUA_PUT_WRITES = (
    _LUA_COMMON
    + r"""
local tag, ns, qns, cid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local reg = KEYS[1]
store_writes(tag, reg, qns, cid, 10, tonumber(ARGV[9]))
local meta = tag .. ':meta'
if ns == '' and redis.call('HGET', meta, 'checkpoint_id') == cid then
  local has_next = redis.call('HGET', meta, 'has_next')
  redis.call('HSET', meta, 'status', status_of(tag .. ':w:' .. qns .. ':' .. cid, has_next),
             'updated_at', ARGV[8])
  redis.call('ZADD', KEYS[2], tonumber(ARGV[7]), ARGV[5])
end
refresh(tag, reg, tonumber(ARGV[6]))
return 'ok'
"""
)

# One checkpoint with its writes and every blob its values need, deltas followed to their
# chain's full blob. KEYS: the namespace index. ARGV: 1 tag, 2 qns, 3 id, 4 has_id.
# Replies {id, row fields, write order, write fields, blobs} where blobs holds, per blob, its
# suffix and {key, version, start, base, chain_bytes, full_bytes, data}.
_LUA_READ = r"""
local tag, qns = ARGV[1], ARGV[2]
local cid = ARGV[3]
if ARGV[4] ~= '1' then
  cid = redis.call('ZREVRANGE', KEYS[1], 0, 0)[1]
  if cid == nil then return false end
end
local suffix = qns .. ':' .. cid
local row = redis.call('HGETALL', tag .. ':cp:' .. suffix)
if #row == 0 then return false end
local order = redis.call('LRANGE', tag .. ':wo:' .. suffix, 0, -1)
local writes = redis.call('HGETALL', tag .. ':w:' .. suffix)
local refs = ''
for i = 1, #row, 2 do if row[i] == 'blobs' then refs = row[i + 1] end end
local out, seen = {}, {}
for s in string.gmatch(refs, '[^\n]+') do
  while s and not seen[s] do
    seen[s] = true
    local b = redis.call('HMGET', tag .. s, 'key', 'version', 'start', 'base', 'chain_bytes',
                         'full_bytes', 'data', 'base_ref')
    if not b[1] then break end
    out[#out + 1] = s
    out[#out + 1] = b
    s = b[8]  -- a delta's base (false for a full blob)
    b[8] = nil
  end
end
return {cid, row, order, writes, out}
"""

# KEYS: registry, global threads zset. ARGV: 1 tag, 2 thread_id.
_LUA_DELETE = r"""
local tag = ARGV[1]
local batch = {}
for _, s in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  batch[#batch + 1] = tag .. s
  if #batch >= 500 then redis.call('UNLINK', unpack(batch)); batch = {} end
end
if #batch > 0 then redis.call('UNLINK', unpack(batch)) end
redis.call('UNLINK', KEYS[1], tag .. ':meta', tag .. ':ns')
redis.call('ZREM', KEYS[2], ARGV[2])
return 'ok'
"""

# KEYS: registry, global threads zset. ARGV: 1 tag, 2 qns, 3 expected head, 4 n ids, 5 n blobs,
# 6 ns, 7 thread_id, then the ids and the blob suffixes to delete. Refuses (-1) when the head
# moved since the caller decided what to drop.
_LUA_PRUNE = r"""
local tag, qns, reg = ARGV[1], ARGV[2], KEYS[1]
local idx = tag .. ':idx:' .. qns
if redis.call('ZREVRANGE', idx, 0, 0)[1] ~= ARGV[3] then return -1 end
local n, nb = tonumber(ARGV[4]), tonumber(ARGV[5])
local removed = 0
for i = 8, 7 + n do
  local cid = ARGV[i]
  removed = removed + redis.call('ZREM', idx, cid)
  for _, kind in ipairs({':cp:', ':w:', ':wo:'}) do
    local s = kind .. qns .. ':' .. cid
    redis.call('UNLINK', tag .. s)
    redis.call('SREM', reg, s)
  end
end
for i = 8 + n, 7 + n + nb do
  redis.call('UNLINK', tag .. ARGV[i])
  redis.call('SREM', reg, ARGV[i])
end
-- a namespace left without checkpoints is gone (keep_last=0)
if redis.call('EXISTS', idx) == 0 then
  redis.call('SREM', reg, ':idx:' .. qns)
  redis.call('SREM', tag .. ':ns', ARGV[6])
  if ARGV[6] == '' then
    redis.call('UNLINK', tag .. ':meta')
    redis.call('SREM', reg, ':meta')
    redis.call('ZREM', KEYS[2], ARGV[7])
  end
  if redis.call('EXISTS', tag .. ':ns') == 0 then redis.call('SREM', reg, ':ns') end
end
return removed
"""

# KEYS: source registry, target registry, global threads zset.
# ARGV: 1 source tag, 2 target tag, 3 target thread id, 4 ttl_ms, 5 score, 6 updated_at.
_LUA_COPY = (
    _LUA_COMMON
    + r"""
local src, dst = ARGV[1], ARGV[2]
if redis.call('EXISTS', dst .. ':ns') == 1 then return 'exists' end
if redis.call('EXISTS', src .. ':ns') == 0 then return 'empty' end
-- the target may hold writes saved against checkpoints it does not have: drop them
for _, s in ipairs(redis.call('SMEMBERS', KEYS[2])) do redis.call('UNLINK', dst .. s) end
redis.call('UNLINK', KEYS[2])
local members = redis.call('SMEMBERS', KEYS[1])
for _, s in ipairs(members) do
  if redis.call('COPY', src .. s, dst .. s, 'REPLACE') == 1 then
    redis.call('SADD', KEYS[2], s)
    redis.call('PERSIST', dst .. s)
  end
end
local meta = dst .. ':meta'
if redis.call('EXISTS', meta) == 1 then
  redis.call('HSET', meta, 'thread_id', ARGV[3], 'updated_at', ARGV[6])
  redis.call('ZADD', KEYS[3], tonumber(ARGV[5]), ARGV[3])
end
refresh(dst, KEYS[2], tonumber(ARGV[4]))
return 'ok'
"""
)

# KEYS: global threads zset. ARGV: (meta key, thread id) pairs: forget threads whose meta is
# gone (expired), unless written again since the caller looked.
_LUA_FORGET = r"""
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('EXISTS', ARGV[i]) == 0 then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i + 1])
  end
end
return n
"""

_SCRIPTS: dict[str, str] = {
    "put": _LUA_PUT,
    "put_writes": _LUA_PUT_WRITES,
    "read": _LUA_READ,
    "delete": _LUA_DELETE,
    "prune": _LUA_PRUNE,
    "copy": _LUA_COPY,
    "forget": _LUA_FORGET,
}
_SHAS = {name: hashlib.sha1(src.encode()).hexdigest() for name, src in _SCRIPTS.items()}

# ------------------------------------------------------------------------- requests (sans-IO)
# The saver's operations are generators that yield these requests and receive the replies, so
# the same code runs over the sync and the async client.


@dataclass(frozen=True, slots=True)
class _Call:
    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Load:
    """Load every script into the server's script cache."""


@dataclass(frozen=True, slots=True)
class _Eval:
    """A script call. After a lost connection it is sent again with ``resend`` args (if any)
    unless ``once``: a script that cannot tell its own earlier run from someone else's."""

    script: str
    keys: Sequence[str]
    args: Sequence[Any]
    resend: Sequence[Any] | None = None
    once: bool = False


@dataclass(frozen=True, slots=True)
class _Pipe:
    """Several calls sent together (one round trip, no transaction)."""

    calls: Sequence[_Call | _Eval]


@dataclass(frozen=True, slots=True)
class _Emit:
    """Not a request: an item for the caller of a streaming operation (``list``)."""

    record: CheckpointRecord


_Request = _Call | _Eval | _Pipe | _Load
_T = TypeVar("_T")
_Op = Generator[Any, Any, _T]


def _q(text: str) -> str:
    """A component of a key name: percent-encoded, so never ``:``, ``{``, ``}`` or whitespace."""
    return quote(text, safe="")


class _Keys:
    """Key names of one thread; see the module docstring."""

    __slots__ = ("prefix", "registry", "tag", "threads")

    def __init__(self, prefix: str, thread_id: str) -> None:
        self.prefix = prefix
        self.tag = f"{prefix}:{{t:{_q(thread_id)}}}"
        self.registry = self.tag + ":keys"
        self.threads = f"{prefix}:threads"

    def idx(self, qns: str) -> str:
        return f"{self.tag}:idx:{qns}"

    def row(self, qns: str, checkpoint_id: str) -> str:
        return f"{self.tag}:cp:{qns}:{checkpoint_id}"

    @property
    def meta(self) -> str:
        return self.tag + ":meta"

    @property
    def namespaces(self) -> str:
        return self.tag + ":ns"


def _blob_suffix(qns: str, key: str, version: Any) -> str:
    return f":b:{qns}:{_q(key)}:{_q(str(version))}"


def mask_url(url: str) -> str:
    """``url`` with its password (in the user part or the query) replaced by ``***``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            if ":" in userinfo:
                netloc = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode(
                [(k, "***" if k.lower() == "password" else v) for k, v in pairs], safe="*"
            )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<unparsable Redis URL>"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pairs(flat: Sequence[bytes]) -> dict[bytes, bytes]:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}


_clock_lock = threading.Lock()
_last_now = datetime.min.replace(tzinfo=UTC)


def _now() -> tuple[int, str]:
    """(microseconds since the epoch, ISO timestamp) of now, increasing within a process."""
    global _last_now
    now = datetime.now(UTC)
    with _clock_lock:
        if now <= _last_now:
            now = _last_now + timedelta(microseconds=1)
        _last_now = now
    delta = now - datetime(1970, 1, 1, tzinfo=UTC)
    return delta // timedelta(microseconds=1), now.isoformat(timespec="microseconds")


def _parse_time(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


_BLOB_META_FIELDS = ("key", "version", "start", "base", "chain_bytes", "full_bytes")


def _stored_blob(fields: Sequence[bytes | None]) -> BlobRow:
    """A blob from its ``_BLOB_META_FIELDS`` values, and ``data`` if that follows."""
    key, version, start, base, chain_bytes, full_bytes, *data = fields
    if None in (key, version, start, chain_bytes, full_bytes) or None in data:
        raise ValueError("a field of the blob is missing")
    return BlobRow(
        key=_text(key),
        version=_text(version),
        start=_text(start),
        base=_text(base) if base is not None else None,
        chain_bytes=int(chain_bytes),  # type: ignore[arg-type]
        full_bytes=int(full_bytes),  # type: ignore[arg-type]
        data=bytes(data[0]) if data else b"",  # type: ignore[arg-type]
    )


@dataclass
class _BlobCache:
    """BlobRow metadata (no data) of stored blobs by (thread, ns, key, version): ``base_of``."""

    size: int = _CACHE_SIZE
    rows: OrderedDict[tuple[str, str, str, str], BlobRow] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, thread_id: str, ns: str, key: str, version: str) -> BlobRow | None:
        with self.lock:
            row = self.rows.get((thread_id, ns, key, version))
            if row is not None:
                self.rows.move_to_end((thread_id, ns, key, version))
            return row

    def put(self, thread_id: str, ns: str, row: BlobRow) -> None:
        meta = row if not row.data else dataclasses.replace(row, data=b"")
        with self.lock:
            self.rows[(thread_id, ns, meta.key, meta.version)] = meta
            self.rows.move_to_end((thread_id, ns, meta.key, meta.version))
            while len(self.rows) > self.size:
                self.rows.popitem(last=False)

    def drop(self, thread_id: str, ns: str | None = None) -> None:
        with self.lock:
            for k in [k for k in self.rows if k[0] == thread_id and ns in (None, k[1])]:
                del self.rows[k]

    def drop_one(self, thread_id: str, ns: str, key: str, version: str) -> None:
        with self.lock:
            self.rows.pop((thread_id, ns, key, version), None)


class RedisSaver(BaseSaver):
    """Checkpoints in Redis (standalone, no modules needed), safe to share between processes.

    ``prefix`` starts every key name (use one per application or test run); ``ttl`` (seconds)
    makes a thread expire that long after its last write; ``retention`` prunes old checkpoints
    on save. Sync methods use one ``redis.Redis`` connection pool; the ``a*`` methods use a
    ``redis.asyncio.Redis`` client per event loop, created on first use.

        with RedisSaver("redis://localhost:6379/0", ttl=7 * 86400) as saver:
            graph = builder.compile(checkpointer=saver)
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "threadline",
        ttl: float | None = None,
        retention: Retention | None = None,
    ) -> None:
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError(f"RedisSaver prefix must be non-empty, without braces: {prefix!r}")
        if ttl is not None and ttl <= 0:
            raise ValueError(f"RedisSaver ttl must be positive seconds, got {ttl!r}")
        self.url = url
        self.prefix = prefix
        self.ttl = ttl
        self.retention = retention
        self._ttl_ms = round(ttl * 1000) if ttl is not None else 0
        self._lock = threading.Lock()
        self._closed = False
        self._cache = _BlobCache()
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aredis.Redis] = (
            weakref.WeakKeyDictionary()
        )
        try:
            self._client: redis.Redis = redis.Redis.from_url(url, **self._client_options(SyncRetry))
        except (ValueError, RedisError) as exc:
            raise SaverUnavailableError(f"invalid Redis URL {mask_url(url)}: {exc}") from exc
        try:
            self._setup()
        except BaseException:
            self._client.close()
            raise

    @classmethod
    def from_conn_string(cls, url: str, **options: Any) -> RedisSaver:
        """A saver on ``url``; use it as ``with RedisSaver.from_conn_string(url) as saver:``."""
        return cls(url, **options)

    @staticmethod
    def _client_options(retry: Any) -> dict[str, Any]:
        # redis-py's own retries are off: a put whose reply was lost must be sent again with
        # its "resent" flag, so the saver retries (``_execute``) instead.
        return {
            "socket_connect_timeout": 10.0,
            "socket_timeout": 60.0,
            "retry": retry(NoBackoff(), 0),
        }

    def _setup(self) -> None:
        """Check (or record) the layout version, and load the scripts."""
        key = f"{self.prefix}:schema_version"
        try:
            self._execute(_Call("set", (key, SCHEMA_VERSION), {"nx": True}))
            found = self._execute(_Call("get", (key,)))
            self._execute(_Load())
        except RedisError as exc:
            raise SaverUnavailableError(f"Redis at {mask_url(self.url)}: {exc}") from exc
        try:
            version = int(found) if found is not None else SCHEMA_VERSION
        except ValueError:
            version = -1
        if version > SCHEMA_VERSION or version < 1:
            raise SaverUnavailableError(
                f"Redis at {mask_url(self.url)} holds threadline data under prefix "
                f"{self.prefix!r} with layout version {_text(found)}, which this threadline does "
                f"not understand (it reads version {SCHEMA_VERSION}); upgrade threadline"
            )

    def _unavailable(self, exc: BaseException) -> SaverUnavailableError:
        return SaverUnavailableError(f"cannot reach Redis at {mask_url(self.url)}: {exc}")

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pools; further calls raise ``SaverUnavailableError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            aclients = list(self._aclients.items())
            self._aclients.clear()
        self._client.close()
        for loop, client in aclients:
            _close_async_client(loop, client)

    async def aclose(self) -> None:
        """Close the saver, awaiting the async client of the running loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._aclients.pop(loop, None)
        if client is not None:
            await client.aclose()
        self.close()

    def __enter__(self) -> RedisSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> RedisSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"RedisSaver({mask_url(self.url)!r}, prefix={self.prefix!r}, {state})"

    # -- running requests ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SaverUnavailableError(f"{self!r} is closed")

    def _execute(self, request: _Request) -> Any:
        self._check_open()
        for attempt in itertools.count():
            try:
                try:
                    return _send(self._client, request)
                except NoScriptError:  # the server lost its scripts (restart, SCRIPT FLUSH)
                    _send(self._client, _Load())
                    return _send(self._client, request)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                again = _again(request)
                if again is None or attempt + 1 >= _SEND_ATTEMPTS:
                    raise self._unavailable(exc) from exc
                request = again
                time.sleep(_SEND_BACKOFF * 2**attempt)
        raise AssertionError("unreachable")

    async def _aexecute(self, request: _Request) -> Any:
        client = self._aclient()
        for attempt in itertools.count():
            try:
                try:
                    return await _asend(client, request)
                except NoScriptError:
                    await _asend(client, _Load())
                    return await _asend(client, request)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                again = _again(request)
                if again is None or attempt + 1 >= _SEND_ATTEMPTS:
                    raise self._unavailable(exc) from exc
                request = again
                await asyncio.sleep(_SEND_BACKOFF * 2**attempt)
        raise AssertionError("unreachable")

    def _aclient(self) -> aredis.Redis:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise SaverUnavailableError(f"{self!r} is closed")
            client = self._aclients.get(loop)
            if client is None:
                client = aredis.Redis.from_url(self.url, **self._client_options(AsyncRetry))
                self._aclients[loop] = client
            return client

    def _run(self, op: _Op[_T]) -> _T:
        reply: Any = None
        try:
            while True:
                reply = self._execute(op.send(reply))
        except StopIteration as stop:
            return stop.value

    async def _arun(self, op: _Op[_T]) -> _T:
        reply: Any = None
        try:
            while True:
                reply = await self._aexecute(op.send(reply))
        except StopIteration as stop:
            return stop.value

    def _stream(self, op: _Op[None]) -> Iterator[CheckpointRecord]:
        reply: Any = None
        while True:
            try:
                request = op.send(reply)
            except StopIteration:
                return
            if isinstance(request, _Emit):
                reply = None
                yield request.record
            else:
                reply = self._execute(request)

    async def _astream(self, op: _Op[None]) -> AsyncIterator[CheckpointRecord]:
        reply: Any = None
        while True:
            try:
                request = op.send(reply)
            except StopIteration:
                return
            if isinstance(request, _Emit):
                reply = None
                yield request.record
            else:
                reply = await self._aexecute(request)

    # -- public API: sync ------------------------------------------------------------------

    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        return self._run(self._op_get(thread_id, checkpoint_ns, checkpoint_id))

    def list(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointRecord]:
        return self._stream(self._op_list(thread_id, checkpoint_ns, filter, before, limit))

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        self._run(self._op_put(record, fork))

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        self._run(self._op_put_writes(thread_id, checkpoint_ns, checkpoint_id, writes))

    def delete_thread(self, thread_id: str) -> None:
        self._run(self._op_delete(thread_id))

    def list_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        return self._run(self._op_list_threads(status, limit))

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        return self._run(self._op_prune(thread_id, keep_last))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(self._op_copy(source_thread_id, target_thread_id))

    # -- public API: async -----------------------------------------------------------------

    async def aget_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        return await self._arun(self._op_get(thread_id, checkpoint_ns, checkpoint_id))

    async def alist(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointRecord]:
        op = self._op_list(thread_id, checkpoint_ns, filter, before, limit)
        async for record in self._astream(op):
            yield record

    async def aput(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        await self._arun(self._op_put(record, fork))

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        await self._arun(self._op_put_writes(thread_id, checkpoint_ns, checkpoint_id, writes))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(self._op_delete(thread_id))

    async def alist_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        return await self._arun(self._op_list_threads(status, limit))

    async def aprune(self, thread_id: str, *, keep_last: int) -> int:
        return await self._arun(self._op_prune(thread_id, keep_last))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(self._op_copy(source_thread_id, target_thread_id))

    # -- operations: reading ---------------------------------------------------------------

    def _read(self, keys: _Keys, qns: str, checkpoint_id: str | None) -> _Eval:
        return _Eval(
            "read",
            [keys.idx(qns)],
            [keys.tag, qns, checkpoint_id or "", "0" if checkpoint_id is None else "1"],
        )

    def _op_get(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> _Op[CheckpointRecord | None]:
        keys = _Keys(self.prefix, thread_id)
        reply = yield self._read(keys, _q(ns), checkpoint_id)
        return self._decode(keys, thread_id, ns, reply) if reply else None

    def _op_list(
        self,
        thread_id: str,
        ns: str,
        filter: Mapping[str, Any] | None,
        before: str | None,
        limit: int | None,
    ) -> _Op[None]:
        if limit is not None and limit <= 0:
            return
        keys, qns = _Keys(self.prefix, thread_id), _q(ns)
        page = min(limit, _PAGE) if limit is not None and not filter else _PAGE
        cursor, produced = before, 0
        while True:
            high = "+" if cursor is None else "(" + cursor
            ids = [
                _text(i)
                for i in (yield _Call("zrevrangebylex", (keys.idx(qns), high, "-", 0, page)))
            ]
            wanted = ids
            if filter and ids:
                metas = yield _Pipe([_Call("hget", (keys.row(qns, i), "metadata")) for i in ids])
                wanted = [
                    i
                    for i, meta in zip(ids, metas, strict=True)
                    if meta is not None
                    and metadata_matches(self._metadata(thread_id, ns, i, meta), filter)
                ]
            if wanted:
                replies = yield _Pipe([self._read(keys, qns, i) for i in wanted])
                for reply in replies:
                    if not reply:
                        continue  # pruned or deleted since the page was read
                    yield _Emit(self._decode(keys, thread_id, ns, reply))
                    produced += 1
                    if limit is not None and produced >= limit:
                        return
            if len(ids) < page:
                return
            cursor = ids[-1]

    @staticmethod
    def _metadata(thread_id: str, ns: str, checkpoint_id: str, data: bytes) -> dict[str, Any]:
        try:
            return decode_metadata(data)
        except SerializationError as exc:
            raise _in_checkpoint(exc, thread_id, ns, checkpoint_id, "") from exc

    def _decode(
        self, keys: _Keys, thread_id: str, ns: str, reply: Sequence[Any]
    ) -> CheckpointRecord:
        raw_id, row_flat, order, writes_flat, blobs_flat = reply
        checkpoint_id = _text(raw_id)
        row = _pairs(row_flat)
        fetched: list[BlobRow] = []
        current = keys.row(_q(ns), checkpoint_id)
        try:
            cp, wanted = wanted_blobs(row[b"body"])
            for i in range(0, len(blobs_flat) - 1, 2):
                current = keys.tag + _text(blobs_flat[i])
                fetched.append(_stored_blob(blobs_flat[i + 1]))
            current = keys.row(_q(ns), checkpoint_id)
            by_version = {(r.key, r.version): r for r in fetched}
            rows = {
                (key, version): by_version[(key, str(version))]
                for key, version in wanted
                if (key, str(version)) in by_version
            }
            chains = {
                (key, start): [r for r in fetched if r.key == key and r.start == start]
                for key, start in chains_needed(rows.values())
            }
            values = assemble_values(cp.versions, rows, chains)
            metadata = decode_metadata(row[b"metadata"])
            writes = tuple(decode_write(w) for w in _write_rows(order, _pairs(writes_flat)))
        except SerializationError as exc:
            raise _in_checkpoint(exc, thread_id, ns, checkpoint_id, keys.tag) from exc
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            raise SerializationError(
                f"thread {thread_id!r}, namespace {ns!r}, checkpoint {checkpoint_id!r}: "
                f"Redis key {current!r} is malformed ({type(exc).__name__}: {exc}); "
                "it was not written by this threadline or was damaged"
            ) from exc
        for blob in fetched:
            self._cache.put(thread_id, ns, blob)
        return CheckpointRecord(
            thread_id=thread_id,
            checkpoint_ns=ns,
            checkpoint=dataclasses.replace(cp, values=values),
            metadata=metadata,
            pending_writes=writes,
        )

    # -- operations: writing ---------------------------------------------------------------

    def _encode(self, record: CheckpointRecord) -> _Op[EncodedCheckpoint]:
        """Encode, fetching the metadata of delta bases this process has not seen yet."""
        thread_id, ns = record.thread_id, record.checkpoint_ns
        misses: list[tuple[str, str]] = []

        def base_of(key: str, version: str) -> BlobRow | None:
            row = self._cache.get(thread_id, ns, key, str(version))
            if row is None:
                misses.append((key, str(version)))
            return row

        encoded = encode_record(record, base_of)  # raises SerializationError before any I/O
        if not misses:
            return encoded
        keys, qns = _Keys(self.prefix, thread_id), _q(ns)
        replies = yield _Pipe(
            [
                _Call("hmget", (keys.tag + _blob_suffix(qns, k, v), *_BLOB_META_FIELDS))
                for k, v in misses
            ]
        )
        for reply in replies:
            try:
                self._cache.put(thread_id, ns, _stored_blob(reply))
            except ValueError:
                continue  # no such base (or a damaged one): the value is stored in full
        return encode_record(record, lambda k, v: self._cache.get(thread_id, ns, k, str(v)))

    def _op_put(self, record: CheckpointRecord, fork: bool) -> _Op[None]:
        thread_id, ns, cp = record.thread_id, record.checkpoint_ns, record.checkpoint
        keys, qns = _Keys(self.prefix, thread_id), _q(ns)
        key_of = {_blob_suffix(qns, k, v): k for k, v in cp.versions.items()}
        in_full: set[str] = set()  # keys the hints called unchanged, but whose blob is missing
        for _ in range(_PUT_ATTEMPTS):
            encoded = yield from self._encode(record)
            blobs = list(encoded.blobs)
            if in_full - {b.key for b in blobs}:
                blobs += _full_blobs(record, in_full - {b.key for b in blobs})
            score, updated_at = _now()
            args: list[Any] = [
                keys.tag, ns, qns, cp.id, cp.parent_id or "",
                "0" if cp.parent_id is None else "1", "1" if fork else "0", thread_id,
                self._ttl_ms, score, updated_at, "1" if cp.next else "0",
                serde.dumps([t.name for t in cp.next]), cp.step, cp.created_at,
                encoded.row.body, encoded.row.metadata, "\n".join(key_of),
            ]  # fmt: skip
            bases = sorted({_blob_suffix(qns, b.key, b.base) for b in blobs if b.base is not None})
            args += [len(blobs), len(bases), len(encoded.writes), "0"]
            for b in blobs:
                delta = b.base is not None
                args += [
                    _blob_suffix(qns, b.key, b.version), b.key, str(b.version), str(b.start),
                    str(b.base) if delta else "", b.chain_bytes, b.full_bytes, b.data,
                    _blob_suffix(qns, b.key, b.base) if delta else "",
                ]  # fmt: skip
            args += bases
            args += _write_args(encoded.writes)
            resend = [*args[:21], "1", *args[22:]]
            reply = yield _Eval("put", [keys.registry, keys.threads], args, resend=resend)
            outcome = _text(reply[0])
            if outcome == "conflict":
                raise _conflict(record, _text(reply[1]) or None, moved=_text(reply[2]) == "1")
            if outcome == "nobase":  # a delta's base vanished (pruned or deleted elsewhere)
                self._cache.drop(thread_id, ns)
                continue
            if outcome == "missing":
                missing = {key_of[_text(s)] for s in reply[1]}
                absent = sorted(missing - cp.values.keys())
                if absent:
                    raise SerializationError(
                        f"checkpoint {cp.id} of thread {thread_id!r} (namespace {ns!r}) names "
                        f"version {cp.versions[absent[0]]!r} of key {absent[0]!r}, which is not "
                        "stored, and carries no value for it; nothing was written"
                    )
                in_full |= missing
                continue
            existed = {_text(s) for s in reply[3]}
            for b in blobs:
                if _blob_suffix(qns, b.key, b.version) in existed:
                    self._cache.drop_one(thread_id, ns, b.key, str(b.version))
                else:
                    self._cache.put(thread_id, ns, _stringly(b))
            yield from self._op_retain(keys, thread_id, ns, int(reply[1]), reply[2])
            return
        raise SaverUnavailableError(
            f"checkpoint {cp.id!r} of thread {thread_id!r} (namespace {ns!r}) was not saved: "
            "the values it extends keep disappearing (is another process pruning the thread?)"
        )

    def _op_put_writes(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[TaskWrite]
    ) -> _Op[None]:
        encoded = encode_writes(writes)  # raises SerializationError before any I/O
        if not encoded:
            return
        keys = _Keys(self.prefix, thread_id)
        score, updated_at = _now()
        args: list[Any] = [
            keys.tag, ns, _q(ns), checkpoint_id, thread_id, self._ttl_ms, score, updated_at,
            len(encoded), *_write_args(encoded),
        ]  # fmt: skip
        yield _Eval("put_writes", [keys.registry, keys.threads], args)

    def _op_delete(self, thread_id: str) -> _Op[None]:
        keys = _Keys(self.prefix, thread_id)
        yield _Eval("delete", [keys.registry, keys.threads], [keys.tag, thread_id])
        self._cache.drop(thread_id)

    def _op_copy(self, source: str, target: str) -> _Op[None]:
        src, dst = _Keys(self.prefix, source), _Keys(self.prefix, target)
        score, updated_at = _now()
        reply = yield _Eval(
            "copy",
            [src.registry, dst.registry, dst.threads],
            [src.tag, dst.tag, target, self._ttl_ms, score, updated_at],
            once=True,  # sent again after it worked, it would find the target taken
        )
        outcome = _text(reply)
        if outcome == "exists":
            raise ValueError(
                f"cannot copy thread {source!r} to {target!r}: the target already has "
                "checkpoints; delete it first or pick another id"
            )

    # -- operations: threads and retention -------------------------------------------------

    def _op_list_threads(
        self, status: ThreadStatus | None, limit: int | None
    ) -> _Op[list[ThreadInfo]]:
        found: list[ThreadInfo] = []
        if limit is not None and limit <= 0:
            return found
        threads_key = f"{self.prefix}:threads"
        gone: list[str] = []
        start = 0
        while True:
            members = [
                _text(m)
                for m in (yield _Call("zrevrange", (threads_key, start, start + _PAGE - 1)))
            ]
            if not members:
                break
            metas = yield _Pipe([_Call("hgetall", (_Keys(self.prefix, m).meta,)) for m in members])
            for member, raw in zip(members, metas, strict=True):
                info = _thread_info(member, raw)
                if info is None:
                    gone.append(member)
                    continue
                if status is not None and info.status != status:
                    continue
                found.append(info)
                if limit is not None and len(found) >= limit:
                    break
            if (limit is not None and len(found) >= limit) or len(members) < _PAGE:
                break
            start += _PAGE
        if gone:  # expired threads: forget them, unless written again meanwhile
            args = [a for t in gone for a in (_Keys(self.prefix, t).meta, t)]
            yield _Eval("forget", [threads_key], args)
        return found

    def _op_prune(self, thread_id: str, keep_last: int) -> _Op[int]:
        if keep_last < 0:
            raise ValueError(f"keep_last must be 0 or more, not {keep_last}")
        keys = _Keys(self.prefix, thread_id)
        namespaces = yield _Call("smembers", (keys.namespaces,))
        removed = 0
        for ns in sorted(_text(n) for n in namespaces):
            removed += yield from self._op_prune_ns(keys, thread_id, ns, keep_last, None)
        return removed

    def _op_retain(
        self, keys: _Keys, thread_id: str, ns: str, count: int, oldest: bytes | None
    ) -> _Op[None]:
        policy = self.retention
        if policy is None or count <= 1:
            return
        cutoff = datetime.now(UTC) - policy.max_age if policy.max_age is not None else None
        too_many = policy.max_checkpoints is not None and count > policy.max_checkpoints
        oldest_at = _parse_time(_text(oldest)) if oldest is not None else None
        too_old = cutoff is not None and oldest_at is not None and oldest_at < cutoff
        if too_many or too_old:
            yield from self._op_prune_ns(keys, thread_id, ns, policy.max_checkpoints, cutoff)

    def _op_prune_ns(
        self,
        keys: _Keys,
        thread_id: str,
        ns: str,
        keep_last: int | None,
        cutoff: datetime | None,
    ) -> _Op[int]:
        """Drop all but the newest ``keep_last`` (and those created before ``cutoff``, but never
        the newest), with every blob no kept checkpoint needs. Retries if the head moves."""
        qns = _q(ns)
        for _ in range(_PRUNE_ATTEMPTS):
            ids = [_text(i) for i in (yield _Call("zrange", (keys.idx(qns), 0, -1)))]
            if not ids:
                return 0
            n_keep = len(ids) if keep_last is None else min(keep_last, len(ids))
            drop, keep = ids[: len(ids) - n_keep], ids[len(ids) - n_keep :]
            rows = yield _Pipe(
                [_Call("hmget", (keys.row(qns, i), "created_at", "body")) for i in keep]
            )
            kept = []
            for i, (created_at, body) in zip(keep, rows, strict=True):
                if body is None:
                    continue
                when = _parse_time(_text(created_at)) if created_at is not None else None
                if cutoff is not None and i != ids[-1] and when is not None and when < cutoff:
                    drop.append(i)
                    continue
                try:
                    cp, _ = wanted_blobs(body)
                except SerializationError as exc:
                    raise _in_checkpoint(exc, thread_id, ns, i, keys.tag) from exc
                kept.append(
                    dataclasses.replace(cp, versions={k: str(v) for k, v in cp.versions.items()})
                )
            if not drop:
                return 0
            blob_prefix = f":b:{qns}:"
            members = yield _Call("smembers", (keys.registry,))
            suffixes = sorted(s for s in map(_text, members) if s.startswith(blob_prefix))
            metas = yield _Pipe(
                [_Call("hmget", (keys.tag + s, "key", "version", "base")) for s in suffixes]
            )
            stored: dict[tuple[str, str], BlobRow] = {}
            suffix_of: dict[tuple[str, str], str] = {}
            for s, (key, version, base) in zip(suffixes, metas, strict=True):
                if key is None or version is None:
                    continue
                row = BlobRow(
                    _text(key), _text(version), "", _text(base) if base else None, 0, 0, b""
                )
                stored[(row.key, row.version)] = row
                suffix_of[(row.key, row.version)] = s
            needed = referenced_blobs(kept, stored)
            doomed = [kv for kv in suffix_of if kv not in needed]
            removed = yield _Eval(
                "prune",
                [keys.registry, keys.threads],
                [keys.tag, qns, ids[-1], len(drop), len(doomed), ns, thread_id,
                 *drop, *(suffix_of[kv] for kv in doomed)],
            )  # fmt: skip
            if int(removed) < 0:
                continue  # a checkpoint was saved meanwhile: decide again
            for kv in doomed:
                self._cache.drop_one(thread_id, ns, *kv)
            return int(removed)
        return 0


# ------------------------------------------------------------------------------- helpers


def _again(request: _Request) -> _Request | None:
    """What to send after ``request`` was lost with its connection; ``None``: give up."""
    if isinstance(request, _Eval):
        if request.once:
            return None
        if request.resend is not None:
            return dataclasses.replace(request, args=request.resend)
    if isinstance(request, _Pipe) and any(isinstance(c, _Eval) and c.once for c in request.calls):
        return None
    return request


def _send(client: redis.Redis, request: _Request) -> Any:
    if isinstance(request, _Call):
        return getattr(client, request.method)(*request.args, **request.kwargs)
    if isinstance(request, _Load):
        return [client.script_load(src) for src in _SCRIPTS.values()]
    if isinstance(request, _Eval):
        return client.evalsha(
            _SHAS[request.script], len(request.keys), *request.keys, *request.args
        )
    pipe = client.pipeline(transaction=False)
    for call in request.calls:
        _queue(pipe, call)
    return pipe.execute()


async def _asend(client: aredis.Redis, request: _Request) -> Any:
    if isinstance(request, _Call):
        return await getattr(client, request.method)(*request.args, **request.kwargs)
    if isinstance(request, _Load):
        return [await client.script_load(src) for src in _SCRIPTS.values()]
    if isinstance(request, _Eval):
        return await client.evalsha(
            _SHAS[request.script], len(request.keys), *request.keys, *request.args
        )
    async with client.pipeline(transaction=False) as pipe:
        for call in request.calls:
            _queue(pipe, call)
        return await pipe.execute()


def _queue(pipe: Any, call: _Call | _Eval) -> None:
    if isinstance(call, _Call):
        getattr(pipe, call.method)(*call.args, **call.kwargs)
    else:
        pipe.evalsha(_SHAS[call.script], len(call.keys), *call.keys, *call.args)


def _close_async_client(loop: asyncio.AbstractEventLoop, client: aredis.Redis) -> None:
    """Close an async client from sync code, on the loop it belongs to, if that still can be."""
    if loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        loop.create_task(client.aclose())
    elif loop.is_running():
        asyncio.run_coroutine_threadsafe(client.aclose(), loop)
    else:
        loop.run_until_complete(client.aclose())


def _write_args(writes: Sequence[WriteRow]) -> list[Any]:
    args: list[Any] = []
    for w in writes:
        args += [f"{w.kind}:{w.task_id}", w.task_name, w.data]
    return args


def _write_rows(order: Sequence[bytes], fields: Mapping[bytes, bytes]) -> Iterator[WriteRow]:
    for raw in order:
        kind, _, task_id = _text(raw).partition(":")
        data = fields.get(b"d:" + raw)
        name = fields.get(b"n:" + raw)
        if data is None or name is None:
            raise KeyError(f"write {_text(raw)!r}")
        yield WriteRow(task_id, kind, _text(name), data)


def _stringly(blob: BlobRow) -> BlobRow:
    """The blob's metadata as it reads back from Redis: versions as strings, no data."""
    return BlobRow(
        blob.key,
        str(blob.version),
        str(blob.start),
        str(blob.base) if blob.base is not None else None,
        blob.chain_bytes,
        blob.full_bytes,
        b"",
    )


def _describe(checkpoint_id: str | None) -> str:
    return "no checkpoint (an empty thread)" if checkpoint_id is None else repr(checkpoint_id)


def _conflict(record: CheckpointRecord, head: str | None, *, moved: bool) -> ConcurrentUpdateError:
    cp = record.checkpoint
    where = f"thread {record.thread_id!r} (namespace {record.checkpoint_ns!r})"
    if moved:
        return ConcurrentUpdateError(
            f"{where} has moved on: checkpoint {cp.id} was computed from parent "
            f"{_describe(cp.parent_id)}, but the newest checkpoint is {_describe(head)}; "
            "another run saved first and nothing was written. Load the thread again and retry, "
            "or save with fork=True to branch on purpose."
        )
    return ConcurrentUpdateError(
        f"{where}: checkpoint {cp.id} does not sort after the newest checkpoint {head}; nothing "
        "was written (it is saved already, and checkpoints are never replaced, or its id was "
        "made by a clock that is behind)"
    )


def _full_blobs(record: CheckpointRecord, keys: set[str]) -> list[BlobRow]:
    """Full blobs of ``keys``' values (their hinted blobs turned out not to exist)."""
    hints = StorageHints(frozenset(keys))
    sub = dataclasses.replace(record, pending_writes=(), hints=hints)
    return list(encode_record(sub, lambda key, version: None).blobs)


def _in_checkpoint(
    exc: SerializationError, thread_id: str, ns: str, checkpoint_id: str, tag: str
) -> SerializationError:
    where = f"thread {thread_id!r}, namespace {ns!r}, checkpoint {checkpoint_id!r}"
    if tag:
        where += f" (Redis keys {tag}:*)"
    return SerializationError(f"{where}: {exc}", path=exc.path, type_name=exc.type_name)


def _thread_info(thread_id: str, raw: Mapping[bytes, bytes] | None) -> ThreadInfo | None:
    if not raw or b"checkpoint_id" not in raw:
        return None
    try:
        names = serde.loads(raw[b"next"]) if raw.get(b"next") else []
    except SerializationError:
        names = []
    return ThreadInfo(
        thread_id=_text(raw.get(b"thread_id", thread_id.encode())),
        status=_text(raw.get(b"status", b"idle")),  # type: ignore[arg-type]
        checkpoint_id=_text(raw[b"checkpoint_id"]),
        updated_at=_text(raw.get(b"updated_at", b"")),
        next=tuple(names),
    )
