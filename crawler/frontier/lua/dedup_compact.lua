-- Dedup snippet, mode compact: exact, in about 14 bytes per fingerprint.
-- KEYS[7]: hash. Field 'buckets' -> bucket count (set once, when the hash is created);
--   'entries' -> entries stored; '<n>' (bucket n) -> 12-byte entries one after the other:
--   bytes 5..12 of the fingerprint, then the second it was recorded (4 bytes, big-endian).
--   A fingerprint's bucket is its bytes 1..4 (big-endian) modulo the bucket count.
--   A bucket that reaches SPLIT_AT entries is split, so lookups stay flat past the capacity:
--   its field then holds '*' and its entries move to FANOUT sub-buckets '<n>.<k>', k being
--   the entry's first suffix byte modulo FANOUT ('<n>.<k>.<j>' one level down, by the next
--   byte, and so on up to MAX_DEPTH levels).
-- ARGV[5]: ttl seconds (0 = forever; else an entry is new again once the clock passes its
--   second + ttl); ARGV[6]: bucket count of a new hash.
-- Defines dedup_open/add/close (turn.lua) and dedup_peek_open/has (seen.lua: read-only).
-- Fingerprints arrive as bytes (at least 12). With a ttl, a bucket drops its expired entries
-- when its entry count reaches a multiple of 16.
local DEDUP_ARGC = 2
local dedup_add_many = false  -- turn.lua adds one fingerprint at a time
local WIDTH, SWEEP_EVERY = 12, 16
local SPLIT_AT, FANOUT, MAX_DEPTH, SPLIT = 256, 16, 6, '*'
local sbyte, ssub, sfind, floor = string.byte, string.sub, string.find, math.floor
local dedup_ttl, dedup_now, dedup_stamp, dedup_buckets
local dedup_entries = 0

-- Read-only: a hash not created yet has no buckets, and nothing is seen.
local function dedup_peek_open()
  dedup_ttl = tonumber(ARGV[5])
  dedup_now = tonumber(redis.call('TIME')[1])
  local t = dedup_now
  dedup_stamp = string.char(floor(t / 16777216) % 256, floor(t / 65536) % 256,
    floor(t / 256) % 256, t % 256)
  dedup_buckets = tonumber(redis.call('HGET', KEYS[7], 'buckets'))
end

local function dedup_open()
  dedup_peek_open()
  if not dedup_buckets then
    dedup_buckets = tonumber(ARGV[6])
    redis.call('HSET', KEYS[7], 'buckets', dedup_buckets)
  end
end

local function dedup_expired(bucket, at)
  if dedup_ttl == 0 then
    return false
  end
  local a, b, c, d = sbyte(bucket, at + 8, at + 11)
  return dedup_now - (((a * 256 + b) * 256 + c) * 256 + d) > dedup_ttl
end

local function dedup_sweep(bucket)
  local kept = {}
  for at = 1, #bucket, WIDTH do
    if not dedup_expired(bucket, at) then
      kept[#kept + 1] = ssub(bucket, at, at + WIDTH - 1)
    end
  end
  dedup_entries = dedup_entries - (#bucket / WIDTH - #kept)
  return table.concat(kept)
end

-- The fingerprint's bucket field, its bucket, its suffix, where the suffix is in it (or nil)
-- and how many splits down the bucket is.
local function dedup_find(fingerprint)
  local a, b, c, d = sbyte(fingerprint, 1, 4)
  local field = tostring((((a * 256 + b) * 256 + c) * 256 + d) % dedup_buckets)
  local suffix = ssub(fingerprint, 5, 12)
  local bucket = redis.call('HGET', KEYS[7], field) or ''
  local depth = 0
  while bucket == SPLIT do
    depth = depth + 1
    field = field .. '.' .. (sbyte(suffix, depth) % FANOUT)
    bucket = redis.call('HGET', KEYS[7], field) or ''
  end
  local at = sfind(bucket, suffix, 1, true)
  while at and (at - 1) % WIDTH ~= 0 do
    at = sfind(bucket, suffix, at + 1, true)
  end
  return field, bucket, suffix, at, depth
end

-- Spread a full bucket over FANOUT sub-buckets by the entries' suffix byte `depth + 1`.
local function dedup_split(field, bucket, depth)
  local parts = {}
  for at = 1, #bucket, WIDTH do
    local k = sbyte(bucket, at + depth) % FANOUT
    local part = parts[k] or {}
    part[#part + 1] = ssub(bucket, at, at + WIDTH - 1)
    parts[k] = part
  end
  for k, part in pairs(parts) do
    redis.call('HSET', KEYS[7], field .. '.' .. k, table.concat(part))
  end
  redis.call('HSET', KEYS[7], field, SPLIT)
end

local function dedup_has(fingerprint)
  if not dedup_buckets then
    return false
  end
  local _, bucket, _, at = dedup_find(fingerprint)
  return at ~= nil and not dedup_expired(bucket, at)
end

local function dedup_add(fingerprint)
  local field, bucket, suffix, at, depth = dedup_find(fingerprint)
  if at then
    if not dedup_expired(bucket, at) then
      return false
    end
    bucket = ssub(bucket, 1, at + 7) .. dedup_stamp .. ssub(bucket, at + WIDTH)
  else
    bucket = bucket .. suffix .. dedup_stamp
    dedup_entries = dedup_entries + 1
    if dedup_ttl > 0 and (#bucket / WIDTH) % SWEEP_EVERY == 0 then
      bucket = dedup_sweep(bucket)
    end
    if #bucket / WIDTH >= SPLIT_AT and depth < MAX_DEPTH then
      dedup_split(field, bucket, depth)
      return true
    end
  end
  redis.call('HSET', KEYS[7], field, bucket)
  return true
end

local function dedup_close()
  if dedup_entries ~= 0 then
    redis.call('HINCRBY', KEYS[7], 'entries', dedup_entries)
  end
end
local function dedup_feedback()
  return ''  -- nothing for the node
end
