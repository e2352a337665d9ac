-- Return expired leases (of any node) to the head of their level of the queue, now: the reclaim
-- step of heartbeat.lua, run by an operator (`crawler requeue`). lua/queue.lua comes before it.
-- KEYS: 1 leases, 2 inflight, 3 queue levels, 4 queue count, 5 (optional) ledger hash of the crawl
-- ARGV: 1 max leases to return in this call
-- Returns {returned, examined}: leases put back in the queue (also added to the ledger's
-- `reclaimed`) and expired ids looked at (fewer than ARGV[1]: none are left).
local now = now_ms()
local requeued, examined = queue_reclaim(KEYS[1], KEYS[2], KEYS[3], KEYS[4], now, tonumber(ARGV[1]))
if KEYS[5] and requeued > 0 then
  redis.call('HINCRBY', KEYS[5], 'reclaimed', requeued)
end
return {requeued, examined}
