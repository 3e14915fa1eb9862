"""Upgrading data written by an older key layout, in place, when a saver starts.

Version 1 (threadline 0.1) stored per checkpoint ``T:cp:<ns>:<id>`` (a hash of ``checkpoint_id``,
``parent_id``, ``step``, ``created_at``, ``body``, ``metadata``, ``blobs``), ``T:w:<ns>:<id>``
(``d:<kind>:<task>`` data and ``n:<kind>:<task>`` task name) and ``T:wo:<ns>:<id>`` (the write
order), and per blob a hash of ``key``, ``version``, ``start``, ``base``, ``base_ref``,
``chain_bytes``, ``full_bytes`` and ``data``. ``MIGRATE_V1`` turns one thread's keys into the
version 2 layout (``keys.py``) in one atomic script; it skips what is migrated already, so two
processes starting at once do no harm. The writes hash keeps its name (``w``) with new fields;
every other key (index, namespaces, meta, registry) keeps its name and form.

Version 2 data needs no rewriting: version 3 only lets a checkpoint's body hold small scalar
values (which then have no blob key), so the saver just moves the marker, and old checkpoints
load and grow as they are.

Stop processes running the old version before starting the new one: an old process that is
still running would keep writing version 1 keys (a new process started later migrates them),
and a version 2 process would call checkpoints holding values malformed.
"""

from __future__ import annotations

from threadline.checkpoint.redis.requests import Call, Op, text

# KEYS: the thread's registry. ARGV: 1 tag. Returns how many keys were rewritten.
MIGRATE_V1 = r"""
local tag, reg = ARGV[1], KEYS[1]
local function hex(c) return string.format('%%%02X', string.byte(c)) end
local function q(s) return (string.gsub(s, '[^%w%-%._~]', hex)) end
local function fields(key)
  local flat, out = redis.call('HGETALL', key), {}
  for i = 1, #flat, 2 do out[flat[i]] = flat[i + 1] end
  return out
end
local n = 0
for _, s in ipairs(redis.call('SMEMBERS', reg)) do
  local kind, rest = string.match(s, '^:(%a+):(.*)$')
  if kind == 'cp' then
    local row = fields(tag .. s)
    redis.call('UNLINK', tag .. s)
    redis.call('SREM', reg, s)
    if row['body'] then
      local refs = string.gsub(row['blobs'] or '', '\n', ' ')
      local metadata = row['metadata'] or ''
      local head = q(row['created_at'] or '') .. ' ' .. #metadata .. ' ' .. refs
      redis.call('SET', tag .. ':c:' .. rest, head .. '\n' .. metadata .. row['body'])
      redis.call('SADD', reg, ':c:' .. rest)
    end
    n = n + 1
  elseif kind == 'wo' then
    local w = fields(tag .. ':w:' .. rest)
    local order = redis.call('LRANGE', tag .. s, 0, -1)
    redis.call('UNLINK', tag .. s, tag .. ':w:' .. rest)
    redis.call('SREM', reg, s)
    for i, id in ipairs(order) do
      if w['d:' .. id] then
        redis.call('HSET', tag .. ':w:' .. rest, id,
                   i .. '|' .. q(w['n:' .. id] or '') .. '\n' .. w['d:' .. id])
      end
    end
    redis.call('HSET', tag .. ':w:' .. rest, 'n', #order)
    n = n + 1
  elseif kind == 'b' and redis.call('TYPE', tag .. s)['ok'] == 'hash' then
    local b = fields(tag .. s)
    local head
    if b['base_ref'] then
      head = 'd|' .. q(b['start']) .. '|' .. b['chain_bytes'] .. '|' .. b['full_bytes'] .. '|'
             .. string.match(b['base_ref'], ':([^:]*)$')
    else
      head = 'f|' .. q(b['start']) .. '|' .. b['chain_bytes'] .. '|' .. b['full_bytes'] .. '|'
    end
    local ttl = redis.call('PTTL', tag .. s)
    redis.call('UNLINK', tag .. s)
    redis.call('SET', tag .. s, head .. '\n' .. b['data'])
    if ttl > 0 then redis.call('PEXPIRE', tag .. s, ttl) end
    n = n + 1
  end
end
local ttl = redis.call('PTTL', reg)
if ttl > 0 then
  for _, s in ipairs(redis.call('SMEMBERS', reg)) do redis.call('PEXPIRE', tag .. s, ttl) end
end
return n
"""


def registry_pattern(prefix: str) -> str:
    """A SCAN pattern matching the registry key of every thread under ``prefix``."""
    return _glob_escape(prefix) + ":{t:*}:keys"


def migrate_v1(prefix: str) -> Op[int]:
    """Rewrite every thread under ``prefix`` from layout 1 to layout 2; returns keys rewritten."""
    rewritten = 0
    cursor = 0
    while True:
        pattern = {"match": registry_pattern(prefix), "count": 500}
        cursor, found = yield Call("scan", (cursor,), pattern)
        for registry in found:
            tag = text(registry).removesuffix(":keys")
            rewritten += int((yield Call("eval", (MIGRATE_V1, 1, registry, tag))))
        if int(cursor) == 0:
            return rewritten


def _glob_escape(text_: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text_)
