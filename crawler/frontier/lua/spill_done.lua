-- Kafka acknowledged these spilled requests: drop their leases (with their requests) from Redis
-- and move the part's next offset written past the highest one Kafka gave them, which counts
-- them in the part's backlog (which crawler status and the idle check add to the queue),
-- atomically. lua/backlog_count.lua comes before this body.
-- KEYS: 1 leases, 2 inflight, 3 backlog (count), 4 backlog read, 5 backlog written (hashes
--       topic -> offset)
-- ARGV: 1 node, 2 topic, 3 the highest offset Kafka gave the spill + 1, 4.. lease ids (the
--       node's, from spill_take.lua)
-- Returns the number dropped (a lease another node reclaimed meanwhile is left alone: its
-- request is crawled from Redis, and its Kafka copy is crawled again when it comes back).
local prefix, dropped, seen = ARGV[1] .. '\t', {}, {}
for from = 4, #ARGV, 1000 do
  local ids = {unpack(ARGV, from, math.min(#ARGV, from + 999))}
  local records = redis.call('HMGET', KEYS[2], unpack(ids))
  for n, id in ipairs(ids) do
    if records[n] and not seen[id] and string.sub(records[n], 1, #prefix) == prefix then
      seen[id] = true
      dropped[#dropped + 1] = id
    end
  end
end
for from = 1, #dropped, 1000 do
  local ids = {unpack(dropped, from, math.min(#dropped, from + 999))}
  redis.call('ZREM', KEYS[1], unpack(ids))
  redis.call('HDEL', KEYS[2], unpack(ids))
end
if tonumber(ARGV[3]) > backlog_offset(KEYS[5], ARGV[2]) then
  redis.call('HSET', KEYS[5], ARGV[2], ARGV[3])
end
backlog_recount(KEYS[3], KEYS[4], KEYS[5])
return #dropped
