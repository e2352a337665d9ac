-- Lease up to ARGV[2] requests for node ARGV[1] for ARGV[3] milliseconds (Redis server time);
-- lua/take.lua comes before this body.
-- KEYS: 1 queue (zset id -> score), 2 data (hash id -> request JSON),
--       3 leases (zset id -> deadline ms), 4 inflight (hash id -> "<node>\t<score>"),
--       5 the node's lease fence (string "<call id>\n<id>,<id>,...", lives one lease time)
-- ARGV: 1 node, 2 count, 3 lease ms, 4 call id: a call sent again after its reply was lost
--       (a client timeout) gets the leases the first one took, not more
-- Returns a flat list id1, json1, id2, json2, ..., then the number of requests left queued.
-- Variadic commands, CHUNK requests at a time.
local CHUNK = 1000
local node, call = ARGV[1], ARGV[4]
local out = {}
local fence = redis.call('GET', KEYS[5])
if fence then
  local sep = string.find(fence, '\n', 1, true)
  if string.sub(fence, 1, sep - 1) == call then
    local prefix, ids = node .. '\t', {}
    for id in string.gmatch(string.sub(fence, sep + 1), '[^,]+') do
      ids[#ids + 1] = id
    end
    for from = 1, #ids, CHUNK do
      local to = math.min(#ids, from + CHUNK - 1)
      local records = redis.call('HMGET', KEYS[4], unpack(ids, from, to))
      local bodies = redis.call('HMGET', KEYS[2], unpack(ids, from, to))
      for n = 1, to - from + 1 do
        local record, body = records[n], bodies[n]
        if record and body and string.sub(record, 1, #prefix) == prefix then
          out[#out + 1] = ids[from + n - 1]
          out[#out + 1] = body
        end
      end
    end
    out[#out + 1] = redis.call('ZCARD', KEYS[1])
    return out
  end
end
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[3])
local leased = {}
local left = tonumber(ARGV[2])
while left > 0 do
  local picked = redis.call('ZPOPMIN', KEYS[1], math.min(left, CHUNK))
  if #picked == 0 then
    break
  end
  left = left - #picked / 2
  local ids, scores = {}, {}
  for i = 1, #picked, 2 do
    ids[#ids + 1], scores[#scores + 1] = picked[i], picked[i + 1]
  end
  for _, id in ipairs(take(ids, scores, node, deadline, out, false)) do
    leased[#leased + 1] = id
  end
end
redis.call('SET', KEYS[5], call .. '\n' .. table.concat(leased, ','), 'PX', tonumber(ARGV[3]))
out[#out + 1] = redis.call('ZCARD', KEYS[1])
return out
