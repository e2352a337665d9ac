-- Requests read back from the Kafka backlog: queue them again under new ids (no dedup: they
-- were recorded when first queued) and take them off the part's backlog count, atomically.
-- KEYS: 1 queue, 2 data, 3 seq, 4 backlog (counter)
-- ARGV: pairs score, request JSON
-- Returns the number queued.
local count = #ARGV / 2
if count == 0 then
  return 0
end
local first = redis.call('INCRBY', KEYS[3], count) - count
for n = 1, count do
  local id = string.format('%012x', first + n)
  redis.call('HSET', KEYS[2], id, ARGV[2 * n])
  redis.call('ZADD', KEYS[1], tonumber(ARGV[2 * n - 1]), id)
end
local left = tonumber(redis.call('DECRBY', KEYS[4], count))
if left < 0 then
  redis.call('SET', KEYS[4], 0)
end
return count
