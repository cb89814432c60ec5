"""The server-side scripts of the cluster tier: each write and its invalidation event are
one atomic step in Redis, and a read checks the value's tags there too.

A stored value is ``prefix + body``. The prefix (written by the script, read only by the
scripts) lists the value's tags with each tag's version when it was written; ``body`` is
what the client signed. A read returns ``body`` only while every tag still has that
version, so ``invalidate_tags`` (one ``HINCRBY`` per tag) voids every value carrying the tag
at once, on every host, without touching the values. A clear of the whole cache is the
same with a tag every value carries.

Every write except a fill takes the next number of the cache's sequence and appends the
event (``s`` seq, ``h`` host, ``o`` op, ``k`` key or tags, ``m`` MAC, ``w`` the write's
time, ``g`` the stream's generation) to the stream, trimmed to about ``maxlen`` entries.
Keys are named in ``KEYS`` and share one hash tag, so the scripts run on a Redis Cluster
too.

A write carries its host's fence. A host that could not reach Redis raises its fence before
it publishes its clear; a write it sent before (which timed out, so the host kept it local,
but which the server may still run when it wakes up) carries the old fence and is refused,
so it cannot land after the clear that was meant to void it.

>>> "XADD" in WRITE and "HMGET" in READ
True
"""

from __future__ import annotations

__all__ = ["READ", "RELEASE", "WRITE"]

#: KEYS: a cluster-wide load lease. ARGV: the holder's token. Deletes it only if it is still
#: that holder's (it may have expired and been taken by another host).
RELEASE = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_CHECK = r"""
-- Where the body of a stored value starts, and whether every tag it was written with still
-- has that version. Reads only the prefix: no copy of the body. Redis is not trusted: a
-- prefix that does not parse is a value that does not count (never a script error).
local function check(tagkey, s)
  local len = #s
  local n = string.byte(s, 1)
  local pos = 2
  if n == 0 then return pos, true end
  if n == 1 then
    -- One tag (the one every value carries, for most values): one HGET, no tables.
    if len < 4 then return pos, false end
    local l = string.byte(s, 2) * 256 + string.byte(s, 3)
    if len < 4 + l then return pos, false end
    local vl = string.byte(s, 4 + l)
    if len < 4 + l + vl then return pos, false end
    local v = redis.call('HGET', tagkey, string.sub(s, 4, 3 + l)) or '0'
    return 5 + l + vl, v == string.sub(s, 5 + l, 4 + l + vl)
  end
  local tags, vers = {}, {}
  for i = 1, n do
    if len < pos + 1 then return pos, false end
    local l = string.byte(s, pos) * 256 + string.byte(s, pos + 1)
    tags[i] = string.sub(s, pos + 2, pos + 1 + l)
    pos = pos + 2 + l
    if len < pos then return pos, false end
    local vl = string.byte(s, pos)
    vers[i] = string.sub(s, pos + 1, pos + vl)
    pos = pos + 1 + vl
    if len < pos - 1 then return pos, false end
  end
  local cur = redis.call('HMGET', tagkey, unpack(tags))
  for i = 1, n do
    local v = cur[i]
    if not v then v = '0' end
    if v ~= vers[i] then return pos, false end
  end
  return pos, true
end

"""

_COMMON = (
    _CHECK
    + r"""
-- The prefix of a value written now with the tags ARGV[i..]: each with its version.
local function tag_prefix(tagkey, i)
  local n = #ARGV - i + 1
  if n <= 0 then return string.char(0) end
  if n == 1 then
    -- Most values carry only the tag every value carries: no tables.
    local t = ARGV[i]
    local v = redis.call('HGET', tagkey, t) or '0'
    return string.char(1, math.floor(#t / 256), #t % 256) .. t .. string.char(#v) .. v
  end
  local vers = redis.call('HMGET', tagkey, unpack(ARGV, i))
  local out = {string.char(n)}
  for j = 1, n do
    local t = ARGV[i + j - 1]
    local v = vers[j] or '0'
    out[j + 1] = string.char(math.floor(#t / 256), #t % 256) .. t .. string.char(#v) .. v
  end
  return table.concat(out)
end

-- A counter's body: 'N', the key's counter mark and the incr's write time (made by the
-- client: ARGV[10]), its tags (ARGV[i..]) as the client encodes them, ':', the count.
local function counter(i, n)
  local out = {'N', ARGV[10], string.char(#ARGV - i + 1)}
  for j = i, #ARGV do
    local t = ARGV[j]
    out[#out + 1] = string.char(math.floor(#t / 256), #t % 256) .. t
  end
  out[#out + 1] = ':' .. string.format('%d', n)
  return table.concat(out)
end

-- Whether a stored string is a value (not a tombstone) whose tags are current.
local function live(tagkey, s)
  if not s or #s == 0 then return false end
  local _, ok = check(tagkey, s)
  return ok
end

-- The body of a stored value and its prefix, or nil when a tag moved since it was written.
local function current(tagkey, s)
  if not s or #s == 0 then return nil end
  local pos, ok = check(tagkey, s)
  if not ok then return nil end
  return string.sub(s, pos), string.sub(s, 1, pos - 1)
end
"""
)

#: KEYS: value, tag versions. Returns the stored value, prefix included (the client skips
#: it: cheaper than a copy here), or nil (missing, tombstone, voided by a tag); a counter
#: with its PTTL, {value, pttl}: its body holds no expiry.
READ = (
    _CHECK
    + r"""
local s = redis.call('GET', KEYS[1])
if not s or #s == 0 then return nil end
local pos, ok = check(KEYS[2], s)
if not ok then
  redis.call('DEL', KEYS[1])
  return nil
end
if string.sub(s, pos, pos) == 'N' then return {s, redis.call('PTTL', KEYS[1])} end
return s
"""
)

#: KEYS: value, tag versions, sequence, stream, generation, host fences.
#: ARGV: op, host:fence, maxlen, event key field, event MAC, event write time, then per op:
#:   set/add/fill: body, px (0: no expiry), tags...
#:   del: tombstone px
#:   incr: delta, default ('' for none), px, the key's counter mark and write time, tags...
#:   touch: px, expected body ('' for a counter), new body
#:   tags: tags...           clear, recover: the tag every value carries
#: Returns {seq (0 when nothing was published), result}, or the error FENCED.
WRITE = (
    _COMMON
    + r"""
local op = ARGV[1]
local result = 1
local host, fence = string.match(ARGV[2], '^(%x+):(%d+)$')
local known = redis.call('HGET', KEYS[6], host)
if known and tonumber(known) > tonumber(fence) then return redis.error_reply('FENCED') end
if op == 'recover' then redis.call('HSET', KEYS[6], host, fence) end

local function set_px(key, val, px, extra)
  if px > 0 then
    if extra then return redis.call('SET', key, val, 'PX', px, extra) end
    return redis.call('SET', key, val, 'PX', px)
  end
  if extra then return redis.call('SET', key, val, extra) end
  return redis.call('SET', key, val)
end

local function tags_from(i)
  local t = {}
  for j = i, #ARGV do t[#t + 1] = ARGV[j] end
  return t
end

-- A counter's new head and count from a stored body: a counter ('N', mark (16), write
-- time (8), tags), or an int that set stored, which becomes a counter here (its signed
-- body cannot be added to). The int body is 'Z2', MAC (16), expiry (8), write time (8),
-- tags, 'I', the int in decimal. Either way the head becomes 'N', the mark and write time
-- of this incr (ARGV[10]), the tags. Nil for any other body.
local function count_of(body)
  local head, num = string.match(body, '^(N.*):(-?%d+)$')
  if head then
    if #head < 26 then return nil end
    return 'N' .. ARGV[10] .. string.sub(head, 26), num
  end
  if string.sub(body, 1, 2) ~= 'Z2' or #body < 36 then return nil end
  local pos = 36
  for _ = 1, string.byte(body, 35) do
    if #body < pos + 1 then return nil end
    pos = pos + 2 + string.byte(body, pos) * 256 + string.byte(body, pos + 1)
  end
  if string.sub(body, pos, pos) ~= 'I' then return nil end
  num = string.match(string.sub(body, pos + 1), '^(-?%d+)$')
  if not num then return nil end
  return 'N' .. ARGV[10] .. string.sub(body, 35, pos - 1), num
end

if op == 'set' or op == 'add' or op == 'fill' then
  local px = tonumber(ARGV[8])
  if op ~= 'set' then
    local s = redis.call('GET', KEYS[1])
    -- add: a live value wins; fill: a live value or a tombstone wins.
    if s and (op == 'fill' or live(KEYS[2], s)) then return {0, 0} end
  end
  if #ARGV[7] > 256 then
    -- A large body is appended by the server rather than joined to the prefix in Lua:
    -- a Lua string of the whole value costs more than the second call.
    set_px(KEYS[1], tag_prefix(KEYS[2], 9), px)
    redis.call('APPEND', KEYS[1], ARGV[7])
  else
    set_px(KEYS[1], tag_prefix(KEYS[2], 9) .. ARGV[7], px)
  end
  if op == 'fill' then return {0, 1} end
elseif op == 'del' then
  local existed = redis.call('GET', KEYS[1])
  result = live(KEYS[2], existed) and 1 or 0
  set_px(KEYS[1], '', tonumber(ARGV[7]))
elseif op == 'incr' then
  local delta = tonumber(ARGV[7])
  local px = tonumber(ARGV[9])
  local s = redis.call('GET', KEYS[1])
  local body, prefix = current(KEYS[2], s or '')
  local n
  if body then
    local head, num = count_of(body)
    if not head then return redis.error_reply('NOTINT') end
    n = tonumber(num) + delta
    if math.abs(n) > 9007199254740991 then return redis.error_reply('OVERFLOW') end
    redis.call('SET', KEYS[1], prefix .. head .. ':' .. string.format('%d', n), 'KEEPTTL')
  else
    if ARGV[8] == '' then return redis.error_reply('MISSING') end
    n = tonumber(ARGV[8]) + delta
    if math.abs(n) > 9007199254740991 then return redis.error_reply('OVERFLOW') end
    set_px(KEYS[1], tag_prefix(KEYS[2], 11) .. counter(11, n), px)
  end
  result = string.format('%d', n)
elseif op == 'touch' then
  local px = tonumber(ARGV[7])
  local s = redis.call('GET', KEYS[1])
  local body, prefix = current(KEYS[2], s or '')
  if not body then return {0, 0} end
  if ARGV[8] == '' then
    if string.sub(body, 1, 1) ~= 'N' then return {0, 0} end
    set_px(KEYS[1], s, px)
  else
    if body ~= ARGV[8] then return {0, 0} end
    set_px(KEYS[1], prefix .. ARGV[9], px)
  end
elseif op == 'tags' or op == 'clear' or op == 'recover' then
  for _, t in ipairs(tags_from(7)) do redis.call('HINCRBY', KEYS[2], t, 1) end
else
  return redis.error_reply('unknown op ' .. op)
end

-- The stream's generation: made once, from the server's clock, by the first write. A server
-- that lost its data makes a new one, which tells every host that events were lost even
-- when the new sequence has caught up with the old numbers.
local gen = redis.call('GET', KEYS[5])
if not gen then
  local t = redis.call('TIME')
  gen = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('SET', KEYS[5], gen)
end
local seq = redis.call('INCR', KEYS[3])
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3], '*',
  's', seq, 'h', host, 'o', op, 'k', ARGV[4], 'm', ARGV[5], 'w', ARGV[6], 'g', gen)
return {seq, result}
"""
)
