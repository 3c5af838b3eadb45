-- Takes tokens per key for one epoch, at most max per key per epoch over every
-- caller, and returns the grants with Redis's time, whose whole seconds are the
-- epoch. One run serves all the keys of a batch: one MGET per 1000 keys, and a
-- SET per key granted tokens, each O(1).
--
-- KEYS[1] the base name; the count of message key k in epoch e is the string
--         KEYS[1]:e:k (the tokens granted to k in e), in the slot of KEYS[1]
--         by its hash tag; it expires ARGV[2] ms after e ends
-- ARGV[1] max per key per epoch, ARGV[2] how long the counts outlive their
-- epoch (ms), then pairs of a key and the tokens wanted for it (distinct keys)
-- Returns {seconds, microseconds, granted for each pair in order}.
local t = redis.call('TIME')
local base = KEYS[1] .. ':' .. t[1] .. ':'
local expires = (tonumber(t[1]) + 1) * 1000 + tonumber(ARGV[2])
local max = tonumber(ARGV[1])
local n = (#ARGV - 2) / 2
local chunk = 1000
local out = {tonumber(t[1]), tonumber(t[2])}
for first = 1, n, chunk do
  local last = math.min(first + chunk - 1, n)
  local names = {}
  for i = first, last do names[#names + 1] = base .. ARGV[1 + 2 * i] end
  local used = redis.call('MGET', unpack(names))
  for i = first, last do
    local want = tonumber(ARGV[2 + 2 * i])
    local u = tonumber(used[i - first + 1] or '0')
    local g = math.min(want, max - u)
    if g > 0 then
      redis.call('SET', names[i - first + 1], u + g, 'PXAT', expires)
    else
      g = 0
    end
    out[#out + 1] = g
  end
end
return out
