-- Return expired leases (of any node) to the head of their level of the queue, now: the reclaim
-- step of heartbeat.lua, run by an operator (`crawler requeue`). lua/queue.lua comes before it.
-- KEYS: 1 leases, 2 inflight, 3 queue levels, 4 queue count, 5 (optional) ledger hash of the crawl
-- ARGV: 1 max leases to return in this call
-- Returns {returned, examined}: leases put back in the queue (also added to the ledger's
-- `reclaimed`) and expired ids looked at (fewer than ARGV[1]: none are left).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local requeued = 0
if #expired > 0 then
  local records = redis.call('HMGET', KEYS[2], unpack(expired))
  redis.call('ZREM', KEYS[1], unpack(expired))
  redis.call('HDEL', KEYS[2], unpack(expired))
  local back, found = {}, {}
  for n = 1, #expired do
    if records[n] then
      back[#back + 1], found[#found + 1] = expired[n], records[n]
    end
  end
  requeued = queue_return(KEYS[3], KEYS[4], back, found)
end
if KEYS[5] and requeued > 0 then
  redis.call('HINCRBY', KEYS[5], 'reclaimed', requeued)
end
return {requeued, #expired}
