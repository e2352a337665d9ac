-- Dedup snippet, mode exact with FRONTIER_DEDUP_TTL: hex fingerprint -> second it was recorded.
-- A fingerprint recorded at second s is new again once the Redis clock passes s + ttl (between
-- ttl and ttl + 1 seconds later). Each call forgets up to 100 expired fingerprints.
-- KEYS[7]: sorted set. ARGV[5]: ttl seconds (> 0).
local DEDUP_ARGC = 1
local dedup_add_many = false  -- turn.lua adds one fingerprint at a time
local dedup_now, dedup_cutoff
local function dedup_peek_open()
  dedup_now = tonumber(redis.call('TIME')[1])
  dedup_cutoff = dedup_now - tonumber(ARGV[5])
end
local function dedup_has(fingerprint)
  local seen = redis.call('ZSCORE', KEYS[7], fingerprint)
  return seen ~= false and tonumber(seen) >= dedup_cutoff
end
local function dedup_open()
  dedup_peek_open()
  local expired = redis.call('ZRANGE', KEYS[7], '-inf', '(' .. dedup_cutoff, 'BYSCORE',
    'LIMIT', 0, 100)
  if #expired > 0 then
    redis.call('ZREM', KEYS[7], unpack(expired))
  end
end
local function dedup_add(fingerprint)
  if dedup_has(fingerprint) then
    return false
  end
  redis.call('ZADD', KEYS[7], dedup_now, fingerprint)
  return true
end
local function dedup_close() end
local function dedup_feedback()
  return ''  -- nothing for the node
end
