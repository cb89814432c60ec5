
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
