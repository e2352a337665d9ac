-- Return leases held by node ARGV[1] to the head of their level of the queue at once (graceful
-- stop), and take the node off the registry. lua/queue.lua comes before this body.
-- KEYS: 1 leases, 2 inflight, 3 queue levels, 4 queue count, 5 nodes, 6 beats
-- ARGV: 1 node, 2.. lease ids. Returns the number returned.
local prefix = ARGV[1] .. '\t'
local returned, records_back, seen = {}, {}, {}
for from = 2, #ARGV, QUEUE_CHUNK do
  local to = math.min(#ARGV, from + QUEUE_CHUNK - 1)
  local ids = {unpack(ARGV, from, to)}
  local records = redis.call('HMGET', KEYS[2], unpack(ids))
  local mine, found = {}, {}
  for n, id in ipairs(ids) do
    local record = records[n]
    if record and not seen[id] and string.sub(record, 1, #prefix) == prefix then
      seen[id] = true
      mine[#mine + 1], found[#found + 1] = id, record
    end
  end
  if #mine > 0 then
    redis.call('ZREM', KEYS[1], unpack(mine))
    redis.call('HDEL', KEYS[2], unpack(mine))
    for n, record in ipairs(found) do
      returned[#returned + 1], records_back[#records_back + 1] = mine[n], record
    end
  end
end
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('HDEL', KEYS[6], ARGV[1])
return queue_return(KEYS[3], KEYS[4], returned, records_back)
