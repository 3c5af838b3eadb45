-- Gives out permits at least one spacing apart on Redis's clock (GCRA). The key
-- holds the time of the latest permit given, which may lie in the future: a
-- permit is reserved ahead for a caller that then waits for it, as long as it is
-- no more than maxReserved spacings ahead; beyond that the caller is told when to
-- try again.
--
-- KEYS[1] latest permit time (µs of Redis TIME)
-- ARGV[1] spacing (µs), ARGV[2] maxReserved, ARGV[3] key ttl (ms)
-- Returns {1, permit time, now} for a permit, {0, retry after (µs), now} if not.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local spacing = tonumber(ARGV[1])
local ahead = tonumber(ARGV[2]) * spacing
local last = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local permit = math.max(now, last + spacing)
if permit - now > ahead then
  return {0, permit - now - ahead, now}
end
redis.call('SET', KEYS[1], permit, 'PX', ARGV[3])
return {1, permit, now}
