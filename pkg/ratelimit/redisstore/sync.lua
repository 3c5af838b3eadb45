-- Records a replica's heartbeat and reported replica count, drops replicas whose lease
-- has run out, and returns the replicas as they stand: whether the live replicas agree
-- on a size, the largest size reported, the live count, the caller's rank by id,
-- the store's time, the pool saved for resuming, and the last cut and pause of
-- throttle signals, after applying the caller's signal (share.Adaptation).
--
-- Every step is O(log n) in the number of replicas n, or O(sweep * log n) for
-- the stale ones, so a sync costs about the same among 10 replicas or 5,000.
--
-- KEYS[1] heartbeats: sorted set, member id, score the replica's lease deadline:
--                     its last heartbeat (ms, Redis TIME) plus the staleAfter it
--                     reported with it
-- KEYS[2] sizes:      sorted set, member id, score its reported replica count
-- KEYS[3] members:    sorted set, member id, score 0 (ranks are lexical by id)
-- KEYS[4] resume:     string, pool in milli-tokens saved by a replica that left
-- KEYS[5] adaptive:   hash: from (the epoch from which the last cut applies),
--                     pool (the pool it set, milli-tokens), pause (the end of
--                     the pause, us of Redis TIME), ceil (the learnt ceiling:
--                     the pool its signal came at, milli-tokens), floor (the
--                     pool of the epoch before, when it passed, or 0)
-- KEYS[6] limit:      hash: the last two changes of the live limit
--                     (ratelimit.LiveLimit), gen, spec and from for the last,
--                     pgen, pspec and pfrom for the one before
-- KEYS[7] spare:      hash: epoch (of the spare tokens), and r:<region> the
--                     tokens of that epoch the replicas of each region gave
--                     (share.Spare); a limit's regions share it
-- KEYS[8] hold:       string, the end (ms of Redis TIME) of a hold: while it
--                     lasts the replicas agree on no size and it lends no tokens
-- The first three keys hold the same ids.
-- ARGV[1] id, ARGV[2] reported size, ARGV[3] the replica's staleAfter (ms),
-- ARGV[4] ttl (ms); a throttle signal, or ARGV[5] empty: ARGV[5] its epoch,
-- ARGV[6] 1 to ask for a cut to ARGV[7] (milli-tokens), ARGV[8] the pause's end
-- (us, 0 for none), ARGV[9] the lead (us) of the replicas before a cut applies;
-- ARGV[10] a change of the live limit the replica proposes (its spec), or
-- empty, and ARGV[11] its lead (us); ARGV[12] the signal's ceiling and
-- ARGV[13] its floor (milli-tokens, 0 for none); a lend of spare tokens
-- (share.Lend), or ARGV[14] empty: ARGV[14] its epoch, ARGV[15] the tokens
-- given, ARGV[16] the most tokens wanted, ARGV[17] the replica's region;
-- ARGV[18] the lease deadline (ms) this store recorded at the replica's last
-- sync, or 0 (share.Report.LeaseUntil)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local id = ARGV[1]

-- A deadline still ahead that the store no longer holds is a write it lost
-- (a failover to a replica that had not got it, a restart without it): it may
-- have lost the others' last heartbeats too, and dropped replicas that still
-- take their shares. It holds the replica count as it is until any lease it can have
-- forgotten has run out: a lease from before now, of the caller's length.
local expect = tonumber(ARGV[18])
if expect >= now then
  local had = tonumber(redis.call('ZSCORE', KEYS[1], id) or '0') or 0
  if had < expect then
    local hold = now + tonumber(ARGV[3])
    if hold > (tonumber(redis.call('GET', KEYS[8]) or '0') or 0) then
      redis.call('SET', KEYS[8], hold, 'PX', tonumber(ARGV[3]))
    end
  end
end
local held = tonumber(redis.call('GET', KEYS[8]) or '0') or 0
if held <= now then held = 0 end

redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), id)
redis.call('ZADD', KEYS[2], tonumber(ARGV[2]), id)
redis.call('ZADD', KEYS[3], 0, id)

-- At most sweep replicas whose lease ran out are dropped per sync; more that
-- went stale at once go over the next syncs of any replica. Until they are
-- gone, the live count leaves them out but the sizes and ranks still count them:
-- the replicas do not agree then, and the largest size and the rank can only be
-- too large, which only shrinks shares.
local sweep = 16
local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now, 'LIMIT', 0, sweep)
for _, s in ipairs(stale) do
  redis.call('ZREM', KEYS[1], s)
  redis.call('ZREM', KEYS[2], s)
  redis.call('ZREM', KEYS[3], s)
end

local live = redis.call('ZCOUNT', KEYS[1], now, '+inf')
local swept = #stale < sweep or redis.call('ZCARD', KEYS[1]) == live
local lo = tonumber(redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2])
local hi = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
local agreed = 0
if swept and lo == hi and hi == live and held == 0 then agreed = 1 end
local rank = redis.call('ZRANK', KEYS[3], id)

-- The keys outlive the ttl, and the longest lease by as much again.
local keyttl = tonumber(ARGV[4])
local longest = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if longest[2] then keyttl = math.max(keyttl, 2 * (tonumber(longest[2]) - now)) end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], keyttl) end
local resume = tonumber(redis.call('GET', KEYS[4]) or '0') or 0

-- Throttle signals: the pause only grows; a cut is made when the signal came in
-- an epoch in which the last cut had taken effect, and applies from the first
-- epoch that begins at least the lead from now, after the signal's.
local a = redis.call('HMGET', KEYS[5], 'from', 'pool', 'pause', 'ceil', 'floor')
local from, pool, pause = tonumber(a[1] or '0') or 0, tonumber(a[2] or '0') or 0, tonumber(a[3] or '0') or 0
local ceil, floor = tonumber(a[4] or '0') or 0, tonumber(a[5] or '0') or 0
if ARGV[5] ~= '' then
  local epoch = tonumber(ARGV[5])
  pause = math.max(pause, tonumber(ARGV[8]))
  if ARGV[6] == '1' and epoch >= from then
    from = math.max(math.floor((nowus + tonumber(ARGV[9])) / 1000000) + 1, epoch + 1)
    pool = tonumber(ARGV[7])
    ceil, floor = tonumber(ARGV[12]), tonumber(ARGV[13])
  end
  redis.call('HSET', KEYS[5], 'from', from, 'pool', pool, 'pause', pause, 'ceil', ceil, 'floor', floor)
end
if from > 0 or pause > 0 then redis.call('PEXPIRE', KEYS[5], keyttl) end

-- The live limit (ratelimit.ProposeLimit): a proposal whose spec is not the
-- last change's is a new change, from the first epoch that begins at least
-- its lead from now, after the last change's.
local l = redis.call('HMGET', KEYS[6], 'gen', 'spec', 'from', 'pgen', 'pspec', 'pfrom')
local gen, spec, lfrom = tonumber(l[1] or '0') or 0, l[2] or '', tonumber(l[3] or '0') or 0
local pgen, pspec, pfrom = tonumber(l[4] or '0') or 0, l[5] or '', tonumber(l[6] or '0') or 0
if ARGV[10] ~= '' and (gen == 0 or ARGV[10] ~= spec) then
  pgen, pspec, pfrom = gen, spec, lfrom
  gen, spec = gen + 1, ARGV[10]
  lfrom = math.max(math.floor((nowus + tonumber(ARGV[11])) / 1000000) + 1, lfrom + 1)
  redis.call('HSET', KEYS[6], 'gen', gen, 'spec', spec, 'from', lfrom, 'pgen', pgen, 'pspec', pspec, 'pfrom', pfrom)
end
if gen > 0 then redis.call('PEXPIRE', KEYS[6], keyttl) end
-- Spare tokens (share.Spare): only of the store's current epoch; given to the
-- giver's region, taken from the taker's own region first, then from the
-- fullest other region.
local lent = 0
if ARGV[14] ~= '' and held == 0 and tonumber(ARGV[14]) == math.floor(nowus / 1000000) then
  local e = tonumber(ARGV[14])
  if (tonumber(redis.call('HGET', KEYS[7], 'epoch') or '0') or 0) ~= e then
    redis.call('DEL', KEYS[7])
    redis.call('HSET', KEYS[7], 'epoch', e)
  end
  local own = 'r:' .. ARGV[17]
  local give, want = tonumber(ARGV[15]), tonumber(ARGV[16])
  if give > 0 then redis.call('HINCRBY', KEYS[7], own, give) end
  if want > 0 then
    lent = math.min(want, tonumber(redis.call('HGET', KEYS[7], own) or '0') or 0)
    if lent > 0 then redis.call('HINCRBY', KEYS[7], own, -lent) end
    while lent < want do
      local all = redis.call('HGETALL', KEYS[7])
      local best, most = nil, 0
      for i = 1, #all, 2 do
        local f, n = all[i], tonumber(all[i + 1])
        if f ~= 'epoch' and f ~= own and (n > most or (n == most and n > 0 and f < best)) then
          best, most = f, n
        end
      end
      if not best then break end
      local g = math.min(want - lent, most)
      redis.call('HINCRBY', KEYS[7], best, -g)
      lent = lent + g
    end
  end
  redis.call('PEXPIRE', KEYS[7], 3000)
end
return {agreed, hi, live, rank, tonumber(t[1]), tonumber(t[2]), resume, from, pool, pause,
  pgen, pspec, pfrom, gen, spec, lfrom, ceil, floor, lent, held}
