-- Dedup snippet, mode bloom: a scalable Bloom filter in one bitmap (crawler.frontier.dedup_bloom).
-- KEYS[7]: bitmap; slice i occupies the bits after slice i - 1.
-- KEYS[8]: meta hash: 'layout' -> 'bytes:hashes:capacity' of every slice the filter may have,
--   comma-separated (fixed when the filter is created); 'slices' -> slices in use;
--   'count' -> fingerprints added to the newest slice.
-- ARGV[5]: the layout of a new filter.
-- Fingerprints arrive as bytes (at least 12): bytes 1..6 and 7..12 are the two hashes h1, h2 of
-- double hashing; the j-th bit of slice i is (h1 + j * h2') mod bits_i, h2' = h2 mod (bits_i - 1)
-- + 1. A fingerprint is seen when all its bits are set in some slice; new ones go to the newest
-- slice. A full slice is followed by the next one of the layout; the last one takes more than its
-- capacity (its false-positive rate rises, as the reported estimate shows).
local DEDUP_ARGC = 1
local bloom_offset, bloom_bits, bloom_hashes, bloom_capacity = {}, {}, {}, {}
local bloom_slices, bloom_count
local bloom_ops = {}
local bloom_changed = false

local function bloom_allocate(slice)
  redis.call('SETRANGE', KEYS[7], (bloom_offset[slice] + bloom_bits[slice]) / 8 - 1, '\0')
end

local function dedup_open()
  local meta = redis.call('HMGET', KEYS[8], 'layout', 'slices', 'count')
  local layout = meta[1] or ARGV[5]
  bloom_slices, bloom_count = tonumber(meta[2]) or 0, tonumber(meta[3]) or 0
  local start = 0
  for bytes, hashes, capacity in string.gmatch(layout, '(%d+):(%d+):(%d+)') do
    local i = #bloom_bits + 1
    bloom_offset[i], bloom_bits[i] = start, tonumber(bytes) * 8
    bloom_hashes[i], bloom_capacity[i] = tonumber(hashes), tonumber(capacity)
    start = start + bloom_bits[i]
  end
  if not meta[1] then
    redis.call('HSET', KEYS[8], 'layout', layout)
    bloom_slices, bloom_count, bloom_changed = 1, 0, true
    bloom_allocate(1)
  end
end

-- Put the BITFIELD operations on the bits of `slice` into bloom_ops after position n: `GET u1
-- <bit>` (set = false) or `SET u1 <bit> 1`. Returns the new end.
local function bloom_bits_of(slice, set, h1, h2, n)
  local m, base = bloom_bits[slice], bloom_offset[slice]
  local x, step = h1 % m, h2 % (m - 1) + 1
  for _ = 1, bloom_hashes[slice] do
    bloom_ops[n + 2], bloom_ops[n + 3] = 'u1', base + x
    if set then
      bloom_ops[n + 1], bloom_ops[n + 4] = 'SET', 1
      n = n + 4
    else
      bloom_ops[n + 1] = 'GET'
      n = n + 3
    end
    x = x + step
    if x >= m then
      x = x - m
    end
  end
  return n
end

local function bloom_in_older_slices(h1, h2)
  local n = 0
  for slice = 1, bloom_slices - 1 do
    n = bloom_bits_of(slice, false, h1, h2, n)
  end
  if n == 0 then
    return false
  end
  local got = redis.call('BITFIELD_RO', KEYS[7], unpack(bloom_ops, 1, n))
  local at = 0
  for slice = 1, bloom_slices - 1 do
    local all = true
    for j = at + 1, at + bloom_hashes[slice] do
      if got[j] == 0 then
        all = false
        break
      end
    end
    if all then
      return true
    end
    at = at + bloom_hashes[slice]
  end
  return false
end

local function dedup_add(fingerprint)
  local a1, a2, a3, a4, a5, a6, b1, b2, b3, b4, b5, b6 = string.byte(fingerprint, 1, 12)
  local h1 = ((((a1 * 256 + a2) * 256 + a3) * 256 + a4) * 256 + a5) * 256 + a6
  local h2 = ((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6
  if bloom_count >= bloom_capacity[bloom_slices] and bloom_slices < #bloom_bits then
    bloom_slices, bloom_count = bloom_slices + 1, 0
    bloom_allocate(bloom_slices)
    bloom_changed = true
  end
  if bloom_in_older_slices(h1, h2) then
    return false
  end
  local n = bloom_bits_of(bloom_slices, true, h1, h2, 0)
  local old = redis.call('BITFIELD', KEYS[7], unpack(bloom_ops, 1, n))
  for j = 1, #old do
    if old[j] == 0 then
      bloom_count = bloom_count + 1
      bloom_changed = true
      return true
    end
  end
  return false
end

local function dedup_close()
  if bloom_changed then
    redis.call('HSET', KEYS[8], 'slices', bloom_slices, 'count', bloom_count)
  end
end
