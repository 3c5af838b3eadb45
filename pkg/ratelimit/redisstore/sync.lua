-- Records a replica's heartbeat and reported pool size, drops replicas whose lease
-- has run out, and returns the pool as it stands: whether the live replicas agree
-- on a size, the largest size reported, the live count, the caller's rank by id,
-- the store's time, and the pool saved for resuming.
--
-- KEYS[1] heartbeats: sorted set, member id, score the replica's lease deadline:
--                     its last heartbeat (ms, Redis TIME) plus the staleAfter it
--                     reported with it
-- KEYS[2] reports:    hash, id -> reported pool size
-- KEYS[3] members:    sorted set, member id, score 0 (ranks are lexical by id)
-- KEYS[4] resume:     string, pool in milli-tokens saved by a replica that left
-- ARGV[1] id, ARGV[2] reported size, ARGV[3] the replica's staleAfter (ms),
-- ARGV[4] ttl (ms)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = ARGV[1]

redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), id)
redis.call('HSET', KEYS[2], id, ARGV[2])
redis.call('ZADD', KEYS[3], 0, id)

local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
for _, s in ipairs(stale) do
  redis.call('ZREM', KEYS[1], s)
  redis.call('HDEL', KEYS[2], s)
  redis.call('ZREM', KEYS[3], s)
end

local live = redis.call('ZCARD', KEYS[1])
local lo, hi = nil, 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
  local n = tonumber(v)
  if lo == nil or n < lo then lo = n end
  if n > hi then hi = n end
end
local agreed = 0
if lo == hi and hi == live then agreed = 1 end
local rank = redis.call('ZRANK', KEYS[3], id)

-- The keys outlive the ttl, and the longest lease by as much again.
local keyttl = tonumber(ARGV[4])
local longest = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if longest[2] then keyttl = math.max(keyttl, 2 * (tonumber(longest[2]) - now)) end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], keyttl) end
local resume = tonumber(redis.call('GET', KEYS[4]) or '0') or 0
return {agreed, hi, live, rank, tonumber(t[1]), tonumber(t[2]), resume}
