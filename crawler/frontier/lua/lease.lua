-- Lease up to ARGV[2] requests for node ARGV[1] for ARGV[3] milliseconds (Redis server time).
-- KEYS: 1 queue (zset id -> score), 2 data (hash id -> request JSON),
--       3 leases (zset id -> deadline ms), 4 inflight (hash id -> "<node>\t<score>"),
--       5 the node's lease fence (string "<call id>\n<id>,<id>,...", lives one lease time)
-- ARGV: 1 node, 2 count, 3 lease ms, 4 call id: a call sent again after its reply was lost
--       (a client timeout) gets the leases the first one took, not more
-- Returns a flat list id1, json1, id2, json2, ..., then the number of requests left queued
local node, call = ARGV[1], ARGV[4]
local fence = redis.call('GET', KEYS[5])
if fence then
  local sep = string.find(fence, '\n', 1, true)
  if string.sub(fence, 1, sep - 1) == call then
    local out, prefix = {}, node .. '\t'
    for id in string.gmatch(string.sub(fence, sep + 1), '[^,]+') do
      local record = redis.call('HGET', KEYS[4], id)
      local body = redis.call('HGET', KEYS[2], id)
      if record and body and string.sub(record, 1, #prefix) == prefix then
        out[#out + 1] = id
        out[#out + 1] = body
      end
    end
    out[#out + 1] = redis.call('ZCARD', KEYS[1])
    return out
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + tonumber(ARGV[3])
local picked = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
local out, ids = {}, {}
for i = 1, #picked, 2 do
  local id, score = picked[i], picked[i + 1]
  redis.call('ZREM', KEYS[1], id)
  local body = redis.call('HGET', KEYS[2], id)
  if body then
    redis.call('ZADD', KEYS[3], deadline, id)
    redis.call('HSET', KEYS[4], id, node .. '\t' .. score)
    out[#out + 1] = id
    out[#out + 1] = body
    ids[#ids + 1] = id
  end
end
redis.call('SET', KEYS[5], call .. '\n' .. table.concat(ids, ','), 'PX', tonumber(ARGV[3]))
out[#out + 1] = redis.call('ZCARD', KEYS[1])
return out
