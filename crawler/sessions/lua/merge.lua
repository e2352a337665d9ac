-- Replace the cookies of a session if nobody changed them since the caller read them.
-- KEYS: 1 session hash
-- ARGV: 1 version the caller read, 2 cookie payload, 3 its encoding, 4 now ms ('' = server time)
-- Returns the new version, or 0 when the version moved on (the caller merges again).
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[1] then return 0 end
local now
if ARGV[4] ~= '' then now = tonumber(ARGV[4]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local version = tonumber(ARGV[1]) + 1
redis.call('HSET', KEYS[1], 'cookies', ARGV[2], 'enc', ARGV[3], 'version', version,
  'updated_at', now)
return version
