-- Milliseconds left of a site's cooldown (0 when none), on Redis server time.
-- KEYS[1]: the site's hash
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cooldown = tonumber(redis.call('HGET', KEYS[1], 'cooldown')) or 0
return math.max(0, math.ceil(cooldown - now))
