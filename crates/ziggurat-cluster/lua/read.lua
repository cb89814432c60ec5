
local s = redis.call('GET', KEYS[1])
if not s or #s == 0 then return nil end
local pos, ok = check(KEYS[2], s)
if not ok then
  redis.call('DEL', KEYS[1])
  return nil
end
if string.sub(s, pos, pos) == 'N' then return {s, redis.call('PTTL', KEYS[1])} end
return s
