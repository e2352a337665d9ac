-- Write what a node changed in one shared cookie jar, and raise the jar's version if anything
-- changed there.
-- KEYS[1] the jar's hash (field '' holds the version, every other field a cookie), KEYS[2] its
-- changes (sorted set: a cookie's field -> the version that set or deleted it last; member ''
-- -> the version below which changes are not all there: forgotten, or written by a node of an
-- earlier version, which records none)
-- ARGV[1] the number of cookies set, ARGV[2] the number of cookies expired on the node,
-- ARGV[3] the version the node's jar holds all of, then the set cookies' field, value pairs
-- (set where the jar holds another value), the expired fields (deleted unless another node
-- changed them after that version: renewed), then the fields deleted
-- Returns {the version before, the version now} as text (the same when nothing changed). A
-- version is a token of Redis's clock (microseconds) above the one before, so it still rises
-- after Redis lost data.
local sets, expired, read = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local before = tonumber(redis.call('HGET', KEYS[1], '') or '0')
local clock = redis.call('TIME')
local version = math.max(before + 1, tonumber(clock[1]) * 1000000 + tonumber(clock[2]))
local floor = tonumber(redis.call('ZSCORE', KEYS[2], '') or '0')
if before > 0 and before > floor then
  -- the jar's last write recorded no change (a node of an earlier version): what changed up
  -- to it is not all in the changes
  local last = redis.call('ZRANGEBYSCORE', KEYS[2], before, before, 'LIMIT', 0, 2)
  if #last == 0 or (#last == 1 and last[1] == '') then
    floor = before
    redis.call('ZADD', KEYS[2], floor, '')
  end
end
local changed = false
for i = 4, 3 + 2 * sets, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) ~= ARGV[i + 1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    redis.call('ZADD', KEYS[2], version, ARGV[i])
    changed = true
  end
end
local first_expired = 4 + 2 * sets
for i = first_expired, #ARGV do
  local deletes = i >= first_expired + expired
  if not deletes then  -- expired: deleted unless changed after the node's version
    local at = redis.call('ZSCORE', KEYS[2], ARGV[i])
    deletes = math.max(tonumber(at or '0'), floor) <= read
  end
  if deletes and redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
    redis.call('ZADD', KEYS[2], version, ARGV[i])
    changed = true
  end
end
if not changed then
  return {string.format('%d', before), string.format('%d', before)}
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
  redis.call('ZADD', KEYS[2], math.max(cutoff, floor), '')
end
return {string.format('%d', before), string.format('%d', version)}
