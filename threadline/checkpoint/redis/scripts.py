"""The Lua scripts: each runs atomically on the server, so every write is one round trip.

``put`` checks that the parent is still the newest checkpoint of its (thread, namespace) and
that the new id sorts after it — compare-and-set — and then writes the checkpoint, its new blobs
(immutable: an existing blob is never rewritten), its pending writes, the index, the thread's
status and the TTLs; or it writes nothing and reports why. ``read`` returns a checkpoint with
its writes and every blob its values need, following each delta to its chain's full blob; of a
blob whose bytes the saver holds already (same CRC-32), only the header, and at the tip of a
chain whose rows it holds (same CRC-32) the walk stops.
Key names and value formats are in ``keys.py``.
"""

from __future__ import annotations

import hashlib

# Helpers shared by the scripts that write. ``each_key`` calls ``fn`` with the suffix of every
# key of a thread: those its registry names, and the checkpoint and writes keys of each
# namespace index, which are not registered (they follow from the index; registering them cost
# Redis about a quarter of a long conversation's size). ``refresh`` re-arms the TTL of every key
# of a thread; ``writes_of`` reads a writes string (``keys.py``) as a list of {field, value};
# ``status_of`` is ``base.thread_status`` over its fields (``<kind>:<task>``); ``store_writes``
# adds writes, one with the field of a stored one replacing it in place.
_COMMON = r"""
local function each_key(tag, reg, fn)
  for _, s in ipairs(redis.call('SMEMBERS', reg)) do
    fn(s)
    if string.sub(s, 1, 5) == ':idx:' then
      local qns = string.sub(s, 6)
      for _, cid in ipairs(redis.call('ZRANGE', tag .. s, 0, -1)) do
        fn(':c:' .. qns .. ':' .. cid)
        fn(':w:' .. qns .. ':' .. cid)
      end
    end
  end
end

local function refresh(tag, reg, ttl)
  if ttl > 0 then
    each_key(tag, reg, function(s) redis.call('PEXPIRE', tag .. s, ttl) end)
    redis.call('PEXPIRE', reg, ttl)
  end
end

local function writes_of(stored)
  local list, at = {}, 1
  while at <= #stored do
    local field, size, from = string.match(stored, '^([^ \n]+) (%d+)\n()', at)
    if not field then error('a writes key is damaged') end
    list[#list + 1] = {field, string.sub(stored, from, from + tonumber(size) - 1)}
    at = from + tonumber(size)
  end
  return list
end

local function status_of(wkey, has_next)
  if has_next ~= '1' then return 'idle' end
  local finished, entries = {}, {}
  for _, e in ipairs(writes_of(redis.call('GET', wkey) or '')) do
    local i = string.find(e[1], ':', 1, true)
    if i then
      local kind, task = string.sub(e[1], 1, i - 1), string.sub(e[1], i + 1)
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

local function store_writes(tag, reg, wsuffix, first, n)
  if n == 0 then return end
  local wkey = tag .. wsuffix
  local list, index = writes_of(redis.call('GET', wkey) or ''), {}
  for i, e in ipairs(list) do index[e[1]] = i end
  for i = 0, n - 1 do
    local field, value = ARGV[first + i * 2], ARGV[first + i * 2 + 1]
    if not index[field] then
      list[#list + 1] = {field, ''}
      index[field] = #list
    end
    list[index[field]][2] = value
  end
  local parts = {}
  for _, e in ipairs(list) do parts[#parts + 1] = e[1] .. ' ' .. #e[2] .. '\n' .. e[2] end
  redis.call('SET', wkey, table.concat(parts), 'KEEPTTL')
end
"""

# The header line of the blob at ``key``, "\n" included ("" if none): its first bytes
# (``keys.HEADER_READ``), or all of it if the header is longer.
_HEADER = r"""
local function header(key)
  local head = redis.call('GETRANGE', key, 0, 511)
  if not string.find(head, '\n', 1, true) then head = redis.call('GET', key) or '' end
  return string.match(head, '^[^\n]*\n') or ''
end
"""

# KEYS: registry, global threads zset.
# ARGV: 1 tag, 2 ns, 3 qns, 4 id, 5 parent, 6 has_parent, 7 fork, 8 thread_id, 9 ttl_ms,
# 10 score, 11 updated_at, 12 has_next, 13 packed checkpoint, 14 suffixes of the blobs it relies
# on (space-separated: values it names but does not bring, bases of its deltas), 15 n_blobs,
# 16 n_deltas, 17 n_writes, 18 resent, 19 n_prefixes; then 2 per blob (suffix, packed blob), 2
# per delta (its base's suffix, "<start>|<chain_bytes>|<full_bytes>" the base must have), 2 per
# write (field, value), 2 per prefix row (suffix, packed row) that replaces a stored blob.
# Replies {'ok', count, the oldest's header's first word, blobs that existed, the oldest's id},
# {'conflict', head, moved} or
# {'missing', {suffixes}} (relied on but not stored as expected); only 'ok' has written anything.
PUT = (
    _COMMON
    + _HEADER
    + r"""
local tag, ns, qns, cid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local reg, threads = KEYS[1], KEYS[2]
local idx_s, cp_s, w_s = ':idx:' .. qns, ':c:' .. qns .. ':' .. cid, ':w:' .. qns .. ':' .. cid
local idx, cp = tag .. idx_s, tag .. cp_s

local function summary(existed)
  local oldest = redis.call('ZRANGE', idx, 0, 0)[1]
  local row = redis.call('GET', tag .. ':c:' .. qns .. ':' .. oldest) or ''
  return {'ok', redis.call('ZCARD', idx), string.match(row, '^[^ \n]*'), existed, oldest}
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
  if ARGV[18] == '1' and head == cid and redis.call('GET', cp) == ARGV[13] then
    return summary({})  -- this very put, sent again after its reply was lost: it is saved
  end
  return {'conflict', head or '', moved and '1' or '0'}
end

local nb, nd, nw = tonumber(ARGV[15]), tonumber(ARGV[16]), tonumber(ARGV[17])
local first_delta = 20 + nb * 2
local missing = {}
for s in string.gmatch(ARGV[14], '[^ ]+') do
  if redis.call('EXISTS', tag .. s) == 0 then missing[#missing + 1] = s end
end
-- a delta extends its base as it was encoded, or not at all (a base rewritten meanwhile)
for i = first_delta, first_delta + nd * 2 - 1, 2 do
  local below = string.match(header(tag .. ARGV[i]), '^[fdp]|([^|\n]*|[^|\n]*|[^|\n]*)|')
  if below ~= ARGV[i + 1] then missing[#missing + 1] = ARGV[i] end
end
if #missing > 0 then return {'missing', missing} end

redis.call('SET', cp, ARGV[13])
redis.call('ZADD', idx, 0, cid)
redis.call('SADD', tag .. ':ns', ns)
redis.call('SADD', reg, ':ns', idx_s)

local existed = {}
for i = 0, nb - 1 do
  local s = ARGV[20 + i * 2]
  if redis.call('SET', tag .. s, ARGV[21 + i * 2], 'NX') then
    redis.call('SADD', reg, s)
  else
    existed[#existed + 1] = s
  end
end

store_writes(tag, reg, w_s, first_delta + nd * 2, nw)

-- compaction: older versions become prefix rows of a blob stored above (a pruned one stays gone)
local first_prefix = first_delta + nd * 2 + nw * 2
for i = 0, tonumber(ARGV[19]) - 1 do
  redis.call('SET', tag .. ARGV[first_prefix + i * 2], ARGV[first_prefix + i * 2 + 1], 'XX')
end

if ns == '' then
  redis.call('HSET', tag .. ':meta', 'checkpoint_id', cid,
             'status', status_of(tag .. w_s, ARGV[12]), 'has_next', ARGV[12],
             'updated_at', ARGV[11])
  redis.call('SADD', reg, ':meta')
  redis.call('ZADD', threads, tonumber(ARGV[10]), ARGV[8])
end
refresh(tag, reg, tonumber(ARGV[9]))
return summary(existed)
"""
)

# KEYS: registry, global threads zset.
# ARGV: 1 tag, 2 ns, 3 qns, 4 id, 5 thread_id, 6 ttl_ms, 7 score, 8 updated_at, 9 n_writes,
# then 2 per write (field, value).
PUT_WRITES = (
    _COMMON
    + r"""
local tag, ns, qns, cid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local reg = KEYS[1]
local w_s = ':w:' .. qns .. ':' .. cid
store_writes(tag, reg, w_s, 10, tonumber(ARGV[9]))
-- registered: the checkpoint may be missing from the index (then nothing else finds them)
if tonumber(ARGV[9]) > 0 then redis.call('SADD', reg, w_s) end
local meta = tag .. ':meta'
if ns == '' and redis.call('HGET', meta, 'checkpoint_id') == cid then
  local has_next = redis.call('HGET', meta, 'has_next')
  redis.call('HSET', meta, 'status', status_of(tag .. w_s, has_next), 'updated_at', ARGV[8])
  redis.call('ZADD', KEYS[2], tonumber(ARGV[7]), ARGV[5])
end
refresh(tag, reg, tonumber(ARGV[6]))
return 'ok'
"""
)

# One checkpoint with its writes and every blob its values need, deltas followed to their
# chain's full blob. KEYS: the namespace index. ARGV: 1 tag, 2 qns, 3 id, 4 has_id, 5 n_tips,
# then 2 per chain tip whose chain the caller holds (suffix, CRC-32), then 2 per blob whose
# bytes it holds (suffix, CRC-32). Either comes as its header line alone if its header records
# that CRC (the first 512 bytes, keys.HEADER_READ, are looked at); the walk stops at such a
# tip, so only the rows above it are sent (``chains.HeldChains`` has the rest).
# Replies {id, packed checkpoint, its writes string, {suffix, stored blob, ...}} or false.
READ = (
    _HEADER
    + r"""
local tag, qns = ARGV[1], ARGV[2]
local cid = ARGV[3]
local tips, held = {}, {}
local first_held = 6 + 2 * tonumber(ARGV[5])
for i = 6, first_held - 1, 2 do tips[ARGV[i]] = ARGV[i + 1] end
for i = first_held, #ARGV - 1, 2 do held[ARGV[i]] = ARGV[i + 1] end
local CRC = '^' .. string.rep('[^|\n]*|', 6) .. '([^|\n]*)\n'  -- a header's seventh field
if ARGV[4] ~= '1' then
  cid = redis.call('ZREVRANGE', KEYS[1], 0, 0)[1]
  if cid == nil then return false end
end
local row = redis.call('GET', tag .. ':c:' .. qns .. ':' .. cid)
if not row then return false end
local writes = redis.call('GET', tag .. ':w:' .. qns .. ':' .. cid) or ''
local out, seen, word = {}, {}, 0
for s in string.gmatch(string.match(row, '^[^\n]*'), '[^ ]+') do
  word = word + 1  -- the header: created_at, metadata length, then the blob suffixes
  while word > 2 and s and not seen[s] do
    seen[s] = true
    local blob, at_tip
    if tips[s] or held[s] then
      local head = header(tag .. s)
      local crc = string.match(head, CRC)
      if crc and (crc == tips[s] or crc == held[s]) then blob, at_tip = head, crc == tips[s] end
    end
    blob = blob or redis.call('GET', tag .. s)
    if not blob then break end
    out[#out + 1] = s
    out[#out + 1] = blob
    if at_tip then break end
    local base = string.match(blob, '^[dp]|[^|\n]*|[^|\n]*|[^|\n]*|([^|\n]*)[|\n]')
    -- a delta's base, or the later version a prefix row is part of; nil for a full blob
    s = base and (string.match(s, '^(.*:)') .. base)
  end
end
return {cid, row, writes, out}
"""
)

# KEYS: registry, global threads zset. ARGV: 1 tag, 2 thread_id.
DELETE = (
    _COMMON
    + r"""
local tag = ARGV[1]
local keys = {}
each_key(tag, KEYS[1], function(s) keys[#keys + 1] = tag .. s end)
for i = 1, #keys, 500 do
  redis.call('UNLINK', unpack(keys, i, math.min(i + 499, #keys)))
end
redis.call('UNLINK', KEYS[1], tag .. ':meta', tag .. ':ns')
redis.call('ZREM', KEYS[2], ARGV[2])
return 'ok'
"""
)

# KEYS: registry, global threads zset. ARGV: 1 tag, 2 qns, 3 the head the caller saw, 4 n ids,
# 5 n blobs, 6 ns, 7 thread_id, then the ids and the blob suffixes to delete. The blobs go only
# if the head is still that one: a checkpoint saved since may use them (the next prune takes
# them). Replies how many checkpoints it deleted.
PRUNE = r"""
local tag, qns, reg = ARGV[1], ARGV[2], KEYS[1]
local idx = tag .. ':idx:' .. qns
local head_kept = redis.call('ZREVRANGE', idx, 0, 0)[1] == ARGV[3]
local n, nb = tonumber(ARGV[4]), tonumber(ARGV[5])
local removed = 0
for i = 8, 7 + n do
  local cid = ARGV[i]
  removed = removed + redis.call('ZREM', idx, cid)
  local c, w = ':c:' .. qns .. ':' .. cid, ':w:' .. qns .. ':' .. cid
  redis.call('UNLINK', tag .. c, tag .. w)
  redis.call('SREM', reg, c, w)
end
if not head_kept then nb = 0 end
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
COPY = (
    _COMMON
    + r"""
local src, dst = ARGV[1], ARGV[2]
if redis.call('EXISTS', dst .. ':ns') == 1 then return 'exists' end
if redis.call('EXISTS', src .. ':ns') == 0 then return 'empty' end
-- the target may hold writes saved against checkpoints it does not have: drop them
for _, s in ipairs(redis.call('SMEMBERS', KEYS[2])) do redis.call('UNLINK', dst .. s) end
redis.call('UNLINK', KEYS[2])
each_key(src, KEYS[1], function(s)
  if redis.call('COPY', src .. s, dst .. s, 'REPLACE') == 1 then
    local kind = string.sub(s, 1, 3)
    if kind ~= ':c:' and kind ~= ':w:' then redis.call('SADD', KEYS[2], s) end
    redis.call('PERSIST', dst .. s)
  end
end)
local meta = dst .. ':meta'
if redis.call('EXISTS', meta) == 1 then
  redis.call('HSET', meta, 'updated_at', ARGV[6])
  redis.call('ZADD', KEYS[3], tonumber(ARGV[5]), ARGV[3])
end
refresh(dst, KEYS[2], tonumber(ARGV[4]))
return 'ok'
"""
)

# KEYS: global threads zset. ARGV: (meta key, thread id) pairs: forget threads whose meta is
# gone (expired), unless written again since the caller looked.
FORGET = r"""
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('EXISTS', ARGV[i]) == 0 then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i + 1])
  end
end
return n
"""

SCRIPTS = dict(
    put=PUT, put_writes=PUT_WRITES, read=READ, delete=DELETE, prune=PRUNE, copy=COPY, forget=FORGET
)
SHAS = {name: hashlib.sha1(src.encode()).hexdigest() for name, src in SCRIPTS.items()}
