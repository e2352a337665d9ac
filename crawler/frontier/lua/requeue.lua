-- Return expired leases (of any node) to the queue with their original score, now: the
-- reclaim step of heartbeat.lua, run by an operator (`crawler requeue`).
-- KEYS: 1 leases, 2 inflight, 3 queue, 4 (optional) ledger hash of the crawl
-- ARGV: 1 max leases to return in this call
-- Returns {returned, examined}: leases put back in the queue (also added to the ledger's
-- `reclaimed`) and expired ids looked at (fewer than ARGV[1]: none are left).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local requeued = 0
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, id in ipairs(expired) do
  local record = redis.call('HGET', KEYS[2], id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  if record then
    local tab = string.find(record, '\t', 1, true)
    redis.call('ZADD', KEYS[3], string.sub(record, tab + 1), id)
    requeued = requeued + 1
  end
end
if KEYS[4] and requeued > 0 then
  redis.call('HINCRBY', KEYS[4], 'reclaimed', requeued)
end
return {requeued, #expired}
