-- The backlog topic was made again (it was not there: deleted by hand, or never made): the
-- part's offsets in the topic of that name that was are forgotten, and its count is 0; what
-- they counted as waiting there is lost with it.
-- KEYS: 1 backlog (count), 2 backlog read, 3 backlog written (hashes topic -> offset)
-- ARGV: 1 topic
-- Returns the requests that waited in the topic that was.
local lost = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
  - tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('SET', KEYS[1], 0)
return math.max(0, lost)
