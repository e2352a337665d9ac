-- Dedup snippet, mode bloom: a scalable, blocked Bloom filter in one string
-- (crawler.frontier.dedup_bloom).
-- KEYS[7]: the filter; slice i occupies the bytes after slice i - 1, in blocks of 64 bytes.
-- KEYS[8]: meta hash: 'layout' -> 'bytes:hashes:capacity' of every slice the filter may have,
--   comma-separated (fixed when the filter is created); 'slices' -> slices in use;
--   'count' -> fingerprints added to the newest slice.
-- ARGV[5]: the layout of a new filter.
-- Fingerprints arrive as bytes (at least 12). Bytes 1..6 (h1) choose the block of each slice:
-- h1 mod blocks; bytes 7..12 (h2) choose the bits in it: `hashes` draws of the Park-Miller
-- generator (s = s * 16807 mod 2^31 - 1, bit s mod 512) seeded with h2 mod (2^31 - 2) + 1.
-- A fingerprint is seen when all its bits are set in some slice; new ones go to the newest
-- slice. A full slice is followed by the next one of the layout; the last one takes more than
-- its capacity (its false-positive rate rises, as the reported estimate shows).
local DEDUP_ARGC = 1
local BLOCK = 64
local sbyte, schar, floor = string.byte, string.char, math.floor
local band, bor, lshift = bit.band, bit.bor, bit.lshift
local bloom_offset, bloom_size, bloom_hashes, bloom_capacity = {}, {}, {}, {}
local bloom_slices, bloom_count
local bloom_changed = false

local function bloom_allocate(slice)
  redis.call('SETRANGE', KEYS[7], bloom_offset[slice] + bloom_size[slice] - 1, '\0')
end

local function dedup_open()
  local meta = redis.call('HMGET', KEYS[8], 'layout', 'slices', 'count')
  local layout = meta[1] or ARGV[5]
  bloom_slices, bloom_count = tonumber(meta[2]) or 0, tonumber(meta[3]) or 0
  local start = 0
  for size, hashes, capacity in string.gmatch(layout, '(%d+):(%d+):(%d+)') do
    local i = #bloom_size + 1
    bloom_offset[i], bloom_size[i] = start, tonumber(size)
    bloom_hashes[i], bloom_capacity[i] = tonumber(hashes), tonumber(capacity)
    start = start + bloom_size[i]
  end
  if not meta[1] then
    redis.call('HSET', KEYS[8], 'layout', layout)
    bloom_slices, bloom_count, bloom_changed = 1, 0, true
    bloom_allocate(1)
  end
end

local function bloom_all_set(block, hashes, seed)
  for _ = 1, hashes do
    seed = seed * 16807 % 2147483647
    local x = seed % 512
    if band(sbyte(block, floor(x / 8) + 1), lshift(1, x % 8)) == 0 then
      return false
    end
  end
  return true
end

local function bloom_with_bits(block, hashes, seed)
  local bytes = {sbyte(block, 1, BLOCK)}
  for _ = 1, hashes do
    seed = seed * 16807 % 2147483647
    local x = seed % 512
    local at = floor(x / 8) + 1
    bytes[at] = bor(bytes[at], lshift(1, x % 8))
  end
  return schar(unpack(bytes))
end

local function dedup_add(fingerprint)
  local a1, a2, a3, a4, a5, a6, b1, b2, b3, b4, b5, b6 = sbyte(fingerprint, 1, 12)
  local h1 = ((((a1 * 256 + a2) * 256 + a3) * 256 + a4) * 256 + a5) * 256 + a6
  local h2 = ((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6
  local seed = h2 % 2147483646 + 1
  if bloom_count >= bloom_capacity[bloom_slices] and bloom_slices < #bloom_size then
    bloom_slices, bloom_count, bloom_changed = bloom_slices + 1, 0, true
    bloom_allocate(bloom_slices)
  end
  local at, block
  for slice = 1, bloom_slices do
    at = bloom_offset[slice] + (h1 % (bloom_size[slice] / BLOCK)) * BLOCK
    block = redis.call('GETRANGE', KEYS[7], at, at + BLOCK - 1)
    if bloom_all_set(block, bloom_hashes[slice], seed) then
      return false
    end
  end
  redis.call('SETRANGE', KEYS[7], at, bloom_with_bits(block, bloom_hashes[bloom_slices], seed))
  bloom_count, bloom_changed = bloom_count + 1, true
  return true
end

local function dedup_close()
  if bloom_changed then
    redis.call('HSET', KEYS[8], 'slices', bloom_slices, 'count', bloom_count)
  end
end
