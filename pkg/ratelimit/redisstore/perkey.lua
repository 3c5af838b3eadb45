-- Takes tokens per key for one epoch, at most max per key per epoch over every
-- caller, and returns the grants with Redis's time, whose whole seconds are the
-- epoch. One run serves all the keys of a batch: one MGET per 1000 keys, and a
-- SET per key granted tokens, each O(1).
--
-- KEYS[i]  the count of the i-th message key (distinct), all in one slot by
--          their hash tag: the string "<epoch>:<tokens granted in it>"; a
--          count of an earlier epoch counts as none. It expires ARGV[2] ms
--          after its epoch ends.
-- ARGV[1] max per key per epoch, ARGV[2] how long the counts outlive their
-- epoch (ms), ARGV[2 + i] the tokens wanted for KEYS[i]
-- Returns {seconds, microseconds, granted for each key in order}.
local t = redis.call('TIME')
local epoch = t[1]
local expires = (tonumber(epoch) + 1) * 1000 + tonumber(ARGV[2])
local max = tonumber(ARGV[1])
local n = #KEYS
local chunk = 1000
local out = {tonumber(t[1]), tonumber(t[2])}
for first = 1, n, chunk do
  local last = math.min(first + chunk - 1, n)
  local used = redis.call('MGET', unpack(KEYS, first, last))
  for i = first, last do
    local want = tonumber(ARGV[2 + i])
    local u = 0
    local v = used[i - first + 1]
    if v then
      local e, c = string.match(v, '^(%d+):(%d+)$')
      if e == epoch then u = tonumber(c) end
    end
    local g = math.min(want, max - u)
    if g > 0 then
      redis.call('SET', KEYS[i], epoch .. ':' .. (u + g), 'PXAT', expires)
    else
      g = 0
    end
    out[#out + 1] = g
  end
end
return out
