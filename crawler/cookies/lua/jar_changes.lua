-- What changed in one shared cookie jar since a version a node read (jar_write.lua).
-- KEYS[1] the jar's hash, KEYS[2] its changes. ARGV[1] the version the node read.
-- Returns {version} when only a whole read tells (the changes since were forgotten, a write
-- recorded none: a node of an earlier version, too many to send), else {version, the fields
-- changed since, their values (false: deleted)}.
local version = redis.call('HGET', KEYS[1], '') or '0'
local since = tonumber(ARGV[1])
local changed = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf', 'WITHSCORES')
if #changed > 2 * 4000 then
  return {version}
end
local fields, newest = {}, since
for i = 1, #changed, 2 do
  if changed[i] == '' then
    return {version}
  end
  fields[#fields + 1] = changed[i]
  newest = math.max(newest, tonumber(changed[i + 1]))
end
if newest < tonumber(version) then
  return {version}
end
if #fields == 0 then
  return {version, {}, {}}
end
return {version, fields, redis.call('HMGET', KEYS[1], unpack(fields))}
