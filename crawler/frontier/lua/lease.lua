-- Lease up to ARGV[2] requests for node ARGV[1] for ARGV[3] milliseconds (Redis server time).
-- KEYS: 1 queue (zset id -> score), 2 data (hash id -> request JSON),
--       3 leases (zset id -> deadline ms), 4 inflight (hash id -> "<node>\t<score>")
-- Returns a flat list id1, json1, id2, json2, ...
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + tonumber(ARGV[3])
local picked = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
local out = {}
for i = 1, #picked, 2 do
  local id, score = picked[i], picked[i + 1]
  redis.call('ZREM', KEYS[1], id)
  local body = redis.call('HGET', KEYS[2], id)
  if body then
    redis.call('ZADD', KEYS[3], deadline, id)
    redis.call('HSET', KEYS[4], id, ARGV[1] .. '\t' .. score)
    out[#out + 1] = id
    out[#out + 1] = body
  end
end
return out
