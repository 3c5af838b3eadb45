-- Takes tokens per key for one epoch, at most max per key per epoch over every
-- caller, and returns the grants with Redis's time, whose whole seconds are the
-- epoch. One run serves all the keys of a batch.
--
-- KEYS[1] the base name; the counts of epoch e are the hash KEYS[1]:e (field
--         the message key, value the tokens granted in e), in the slot of
--         KEYS[1] by its hash tag; it expires ARGV[2] ms after e ends
-- ARGV[1] max per key per epoch, ARGV[2] how long the counts outlive their
-- epoch (ms), then pairs of
-- a key and the tokens wanted for it (distinct keys)
-- Returns {seconds, microseconds, granted for each pair in order}.
local t = redis.call('TIME')
local h = KEYS[1] .. ':' .. t[1]
local max = tonumber(ARGV[1])
local out = {tonumber(t[1]), tonumber(t[2])}
local wrote = false
for i = 3, #ARGV, 2 do
  local want = tonumber(ARGV[i + 1])
  local used = tonumber(redis.call('HGET', h, ARGV[i]) or '0')
  local g = math.min(want, max - used)
  if g > 0 then
    redis.call('HINCRBY', h, ARGV[i], g)
    wrote = true
  else
    g = 0
  end
  out[#out + 1] = g
end
if wrote then redis.call('PEXPIREAT', h, (tonumber(t[1]) + 1) * 1000 + tonumber(ARGV[2])) end
return out
