-- A site answered "slow down" (429, 503, an anti-bot code): cool it down for every node.
-- KEYS[1]: the site's hash
-- ARGV: 1 base cooldown ms, 2 Retry-After ms (0 = none), 3 max cooldown ms,
--       4 minimum rate factor, 5 strike window ms (strikes within it double the cooldown)
-- Returns the milliseconds until the cooldown ends.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'factor', 'cooldown', 'strikes', 'last_strike')
local factor = tonumber(state[1]) or 1
local cooldown = tonumber(state[2]) or 0
local strikes = tonumber(state[3]) or 0
local last_strike = tonumber(state[4]) or 0
if now - last_strike < tonumber(ARGV[5]) then strikes = strikes + 1 else strikes = 1 end
local length = math.min(tonumber(ARGV[3]), tonumber(ARGV[1]) * 2 ^ (strikes - 1))
length = math.max(length, tonumber(ARGV[2]))
cooldown = math.max(cooldown, now + length)
factor = math.max(tonumber(ARGV[4]), factor / 2)
redis.call('HSET', KEYS[1], 'factor', factor, 'cooldown', cooldown, 'updated', now,
  'strikes', strikes, 'last_strike', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(cooldown - now) + 3600000)
return math.ceil(cooldown - now)
