-- Store a session (login or import): replace its hash, set its TTL, index it for LRU.
-- KEYS: 1 session hash, 2 accounts (zset account -> last use, ms)
-- ARGV: 1 account, 2 ttl ms, 3 now ms ('' = server time), 4.. field/value pairs
--       (every field except generation, version and updated_at, which this script sets)
-- Returns {generation, version}: both one more than before.
local now
if ARGV[3] ~= '' then now = tonumber(ARGV[3]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local old = redis.call('HMGET', KEYS[1], 'generation', 'version')
local generation = (tonumber(old[1]) or 0) + 1
local version = (tonumber(old[2]) or 0) + 1
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'generation', generation, 'version', version, 'updated_at', now,
  unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(redis.call('HGET', KEYS[1], 'last_used')) or 0, ARGV[1])
return {generation, version}
