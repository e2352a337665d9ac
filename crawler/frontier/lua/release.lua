-- Return leases held by node ARGV[1] to the queue at once (graceful stop).
-- KEYS: 1 leases, 2 inflight, 3 queue, 4 nodes
-- ARGV: 1 node, 2.. lease ids. Returns the number returned.
local prefix = ARGV[1] .. '\t'
local released = 0
for i = 2, #ARGV do
  local record = redis.call('HGET', KEYS[2], ARGV[i])
  if record and string.sub(record, 1, #prefix) == prefix then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('ZADD', KEYS[3], string.sub(record, #prefix + 1), ARGV[i])
    released = released + 1
  end
end
redis.call('ZREM', KEYS[4], ARGV[1])
return released
