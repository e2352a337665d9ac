-- Put a failed request back in the queue (`crawler failed retry`), all or nothing: a fresh id
-- from seq, as complete.lua gives a new request, its JSON in data, the id in queue, the failure
-- record removed. The dupefilter is not touched: the request was recorded as seen when it was
-- first enqueued, and goes back regardless.
-- KEYS: 1 failed (hash id -> failure JSON), 2 data, 3 queue, 4 seq
-- ARGV: 1 failed id, 2 the failure record as read (retried only if it is still that),
--       3 score (-priority), 4 request JSON
-- Returns the new id, or '' when the record is gone or changed since it was read.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return ''
end
local id = string.format('%012x', redis.call('INCR', KEYS[4]))
redis.call('HSET', KEYS[2], id, ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[3], id)
redis.call('HDEL', KEYS[1], ARGV[1])
return id
