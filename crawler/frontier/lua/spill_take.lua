-- Lease the lowest-priority requests a part holds beyond its bound to node ARGV[1], to be
-- spilled to Kafka (crawler.frontier.backlog): a lease like any other, so a node that dies
-- while spilling only returns them to the queue when the lease expires.
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
local picked = redis.call('ZRANGE', KEYS[1], -count, -1, 'WITHSCORES')
local out = {}
for i = 1, #picked, 2 do
  local id, score = picked[i], picked[i + 1]
  redis.call('ZREM', KEYS[1], id)
  local body = redis.call('HGET', KEYS[2], id)
  if body then
    redis.call('ZADD', KEYS[3], deadline, id)
    redis.call('HSET', KEYS[4], id, ARGV[1] .. '\t' .. score)
    out[#out + 1] = id
    out[#out + 1] = score
    out[#out + 1] = body
  end
end
return out
