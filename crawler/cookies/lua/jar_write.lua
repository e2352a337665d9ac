-- Write what a node changed in one shared cookie jar, and raise the jar's version.
-- KEYS[1] the jar's hash (field '' holds the version, every other field a cookie)
-- ARGV[1] the number of cookies set, then their field, value pairs, then the fields deleted
-- Returns {the version before, the version now} as text. A version is a token of Redis's
-- clock (microseconds) above the one before, so it still rises after Redis lost data.
local sets = tonumber(ARGV[1])
local before = tonumber(redis.call('HGET', KEYS[1], '') or '0')
local clock = redis.call('TIME')
local version = math.max(before + 1, tonumber(clock[1]) * 1000000 + tonumber(clock[2]))
for i = 2, 1 + 2 * sets, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
for i = 2 + 2 * sets, #ARGV do
  redis.call('HDEL', KEYS[1], ARGV[i])
end
redis.call('HSET', KEYS[1], '', string.format('%d', version))
return {string.format('%d', before), string.format('%d', version)}
