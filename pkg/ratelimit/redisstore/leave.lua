-- Removes a replica from the store at once and, when it gives a pool, keeps that
-- pool for ttl so that a replica registering meanwhile resumes the ramp from it.
--
-- KEYS as in sync.lua. ARGV[1] id, ARGV[2] pool (milli-tokens, 0 for none),
-- ARGV[3] ttl (ms)
local id = ARGV[1]
redis.call('ZREM', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[4], ARGV[2], 'PX', ARGV[3])
end
return 1
