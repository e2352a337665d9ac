-- Reserve the next request slot of a site (GCRA on Redis server time).
-- KEYS[1]: the site's hash {tat, factor, updated, cooldown}
-- ARGV: 1 interval ms at full rate, 2 burst (>= 1), 3 recovery of the rate factor per second,
--       4 this request's spread: the share of the interval it leaves before the next slot
--       (POLITENESS_JITTER draws it around 1; the mean rate holds)
-- Returns the milliseconds the caller must wait before sending (0 = now).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tat', 'factor', 'updated', 'cooldown')
local tat = tonumber(state[1]) or 0
local factor = tonumber(state[2]) or 1
local updated = tonumber(state[3]) or now
local cooldown = tonumber(state[4]) or 0
if factor < 1 then
  factor = math.min(1, factor + (now - updated) / 1000 * tonumber(ARGV[3]))
end
local interval = tonumber(ARGV[1]) / factor
local tau = interval * (tonumber(ARGV[2]) - 1)
if cooldown > now then
  tat = math.max(tat, cooldown + tau)  -- no burst right after a cooldown
end
local booked = math.max(tat, now)
local new_tat = booked + interval * tonumber(ARGV[4])
local wait = math.max(0, booked - tau - now, cooldown - now)
redis.call('HSET', KEYS[1], 'tat', new_tat, 'factor', factor, 'updated', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(new_tat - now) + 3600000)
return math.ceil(wait)
