
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
