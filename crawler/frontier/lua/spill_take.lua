-- Lease the lowest-priority requests a part holds beyond its bound to node ARGV[1], to be
-- spilled to Kafka (crawler.frontier.backlog): a lease like any other, so a node that dies
-- while spilling only returns them to the queue when the lease expires. lua/take.lua comes
-- before this body.
-- KEYS: 1 queue, 2 data, 3 leases, 4 inflight
-- ARGV: 1 node, 2 requests to keep queued (FRONTIER_QUEUE_MAX), 3 most to take, 4 lease ms
-- Returns a flat list id1, score1, json1, ... (the tail of the queue, lowest priority last)
local excess = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
if excess <= 0 then
  return {}
end
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[4])
local count = math.min(excess, tonumber(ARGV[3]))
-- Variadic commands, CHUNK requests at a time, in the queue's order (the tail's first chunk
-- first: the indices from the end of the requests after it do not change).
local CHUNK = 1000
local out = {}
while count > 0 do
  local size = math.min(count, CHUNK)
  local picked = redis.call('ZRANGE', KEYS[1], -count, size - count - 1, 'WITHSCORES')
  count = count - size
  local ids, scores = {}, {}
  for i = 1, #picked, 2 do
    ids[#ids + 1], scores[#scores + 1] = picked[i], picked[i + 1]
  end
  redis.call('ZREM', KEYS[1], unpack(ids))
  take(ids, scores, ARGV[1], deadline, out, true)
end
return out
