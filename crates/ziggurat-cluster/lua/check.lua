
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

