-- Kafka acknowledged these spilled requests: drop their leases and bodies from Redis and
-- count them in the part's backlog (which crawler status and the idle check add to the
-- queue), atomically.
-- KEYS: 1 leases, 2 inflight, 3 data, 4 backlog (counter)
-- ARGV: 1 node, 2.. lease ids (the node's, from spill_take.lua)
-- Returns the number dropped (a lease another node reclaimed meanwhile is left alone: its
-- request is crawled from Redis, and its Kafka copy is crawled again when it comes back).
local prefix, dropped = ARGV[1] .. '\t', 0
for i = 2, #ARGV do
  local record = redis.call('HGET', KEYS[2], ARGV[i])
  if record and string.sub(record, 1, #prefix) == prefix then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('HDEL', KEYS[3], ARGV[i])
    dropped = dropped + 1
  end
end
if dropped > 0 then
  redis.call('INCRBY', KEYS[4], dropped)
end
return dropped
