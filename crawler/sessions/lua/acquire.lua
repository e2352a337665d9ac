-- Hand out the least recently used account that may send a request now, and mark it used.
-- KEYS: 1 accounts (zset account -> last use, ms)
-- ARGV: 1 session key prefix (same hash tag as KEYS[1]), 2 now ms ('' = server time),
--       3 requests per account per minute (0 = no limit)
-- An account qualifies when its health is healthy, or risky/banned with the cooldown over
-- (it becomes healthy again), it is not past expires_at and under the per-minute limit.
-- Members whose session hash is gone (TTL, invalidate) are dropped on the way.
-- Returns {account, field1, value1, ...} of the chosen session (after the update), or false.
local now
if ARGV[2] ~= '' then now = tonumber(ARGV[2]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local minute = math.floor(now / 60000)
local limit = tonumber(ARGV[3])
for _, account in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local key = ARGV[1] .. account
  local s = redis.call('HMGET', key, 'health', 'cooldown_until', 'minute', 'used', 'expires_at')
  local health = s[1]
  if not health then
    redis.call('ZREM', KEYS[1], account)
  else
    local used = 0
    if tonumber(s[3]) == minute then used = tonumber(s[4]) or 0 end
    local expires = tonumber(s[5]) or 0
    local resting = (tonumber(s[2]) or 0) > now
    local usable = health == 'healthy' or health == 'risky' or health == 'banned'
    if usable and not resting and (expires == 0 or expires > now)
        and (limit == 0 or used < limit) then
      redis.call('HSET', key, 'health', 'healthy', 'last_used', now, 'minute', minute,
        'used', used + 1)
      redis.call('ZADD', KEYS[1], now, account)
      local out = redis.call('HGETALL', key)
      table.insert(out, 1, account)
      return out
    end
  end
end
return false
