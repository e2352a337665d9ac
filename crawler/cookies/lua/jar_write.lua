-- Write what a node changed in one shared cookie jar, and raise the jar's version.
-- KEYS[1] the jar's hash (field '' holds the version, every other field a cookie), KEYS[2] its
-- changes (sorted set: a cookie's field -> the version that set or deleted it last; member ''
-- -> the version below which changes were forgotten)
-- ARGV[1] the number of cookies set, then their field, value pairs, then the fields deleted
-- Returns {the version before, the version now} as text. A version is a token of Redis's
-- clock (microseconds) above the one before, so it still rises after Redis lost data.
local sets = tonumber(ARGV[1])
local before = tonumber(redis.call('HGET', KEYS[1], '') or '0')
local clock = redis.call('TIME')
local version = math.max(before + 1, tonumber(clock[1]) * 1000000 + tonumber(clock[2]))
for i = 2, 1 + 2 * sets, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], version, ARGV[i])
end
for i = 2 + 2 * sets, #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[i])
  redis.call('ZADD', KEYS[2], version, ARGV[i])
end
redis.call('HSET', KEYS[1], '', string.format('%d', version))
if before == 0 then
  -- a new jar (or one purged, or lost with Redis's data): a node that read another before
  -- reads this one whole, dropping what the other held
  redis.call('ZADD', KEYS[2], version - 1, '')
end
-- Changes an hour of versions old are forgotten: a node that read the jar before then reads
-- it whole (jar_changes.lua).
local cutoff = version - 3600000000
if redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%d', cutoff)) > 0 then
  redis.call('ZADD', KEYS[2], cutoff, '')
end
return {string.format('%d', before), string.format('%d', version)}
