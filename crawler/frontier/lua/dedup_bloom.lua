-- Dedup snippet, mode bloom: a scalable, blocked Bloom filter in chunk strings
-- (crawler.frontier.dedup_bloom).
-- KEYS[7]: meta hash: 'layout' -> 'bytes+bytes+...:hashes:capacity' of every slice the filter
--   may have (its chunks' lengths), comma-separated (fixed when the filter is created);
--   'slices' -> slices in use; 'count' -> fingerprints added to the newest slice.
-- KEYS[8..]: the chunks, in the layout's order (slice 1's, then slice 2's, ...); each is
--   allocated whole when its slice comes into use and holds blocks of 256 bytes.
-- ARGV[5]: the layout of a new filter.
-- Defines dedup_open/add/close (turn.lua) and dedup_peek_open/has (seen.lua: read-only).
-- Fingerprints arrive as bytes (at least 12). Bytes 1..6 (h1) choose the block of each slice:
-- h1 mod the slice's blocks, counted through its chunks; bytes 7..12 (h2) choose the bits in
-- it: `hashes` draws of the Park-Miller generator (s = s * 16807 mod 2^31 - 1, bit s mod 2048)
-- seeded with h2 mod (2^31 - 2) + 1.
-- A fingerprint is seen when all its bits are set in some slice; new ones go to the newest
-- slice. A full slice is followed by the next one of the layout; the last one takes more than
-- its capacity (its false-positive rate rises, as the reported estimate shows).
local DEDUP_ARGC = 1
local dedup_add_many = false  -- turn.lua adds one fingerprint at a time
local BLOCK, BLOCK_BITS = 256, 2048
local sbyte, schar, floor = string.byte, string.char, math.floor
local band, bor, lshift = bit.band, bit.bor, bit.lshift
-- Per slice: its blocks, hashes, capacity, and per chunk {key, blocks}.
local bloom_blocks, bloom_hashes, bloom_capacity, bloom_chunks = {}, {}, {}, {}
local bloom_slices, bloom_count
local bloom_changed = false

local function bloom_allocate(slice)
  for _, chunk in ipairs(bloom_chunks[slice]) do
    redis.call('SETRANGE', chunk[1], chunk[2] * BLOCK - 1, '\0')
  end
end

-- Read the filter's layout and fill (a filter not created yet: ARGV[5]'s layout, no slice).
-- Returns the layout and whether the filter exists.
local function dedup_peek_open()
  local meta = redis.call('HMGET', KEYS[7], 'layout', 'slices', 'count')
  local layout = meta[1] or ARGV[5]
  bloom_slices, bloom_count = tonumber(meta[2]) or 0, tonumber(meta[3]) or 0
  local key = 8
  for sizes, hashes, capacity in string.gmatch(layout, '([%d+]+):(%d+):(%d+)') do
    local chunks, blocks = {}, 0
    for size in string.gmatch(sizes, '%d+') do
      chunks[#chunks + 1] = {KEYS[key], math.max(1, floor(tonumber(size) / BLOCK))}
      blocks, key = blocks + chunks[#chunks][2], key + 1
    end
    local i = #bloom_blocks + 1
    bloom_blocks[i], bloom_chunks[i] = blocks, chunks
    bloom_hashes[i], bloom_capacity[i] = tonumber(hashes), tonumber(capacity)
  end
  return layout, meta[1] ~= false
end

local function dedup_open()
  local layout, exists = dedup_peek_open()
  if not exists then
    redis.call('HSET', KEYS[7], 'layout', layout)
    bloom_slices, bloom_count, bloom_changed = 1, 0, true
    bloom_allocate(1)
  end
end

-- The chunk key and byte offset of block `index` (0-based) of a slice.
local function bloom_locate(slice, index)
  for _, chunk in ipairs(bloom_chunks[slice]) do
    if index < chunk[2] then
      return chunk[1], index * BLOCK
    end
    index = index - chunk[2]
  end
end

local function bloom_all_set(block, hashes, seed)
  if #block < BLOCK then
    return false  -- a chunk that is missing (deleted by hand): nothing set
  end
  for _ = 1, hashes do
    seed = seed * 16807 % 2147483647
    local x = seed % BLOCK_BITS
    if band(sbyte(block, floor(x / 8) + 1), lshift(1, x % 8)) == 0 then
      return false
    end
  end
  return true
end

local function bloom_with_bits(block, hashes, seed)
  local bytes = {sbyte(block, 1, BLOCK)}
  for at = #bytes + 1, BLOCK do
    bytes[at] = 0
  end
  for _ = 1, hashes do
    seed = seed * 16807 % 2147483647
    local x = seed % BLOCK_BITS
    local at = floor(x / 8) + 1
    bytes[at] = bor(bytes[at], lshift(1, x % 8))
  end
  return schar(unpack(bytes))
end

-- h1 (the block of each slice) and the bit generator's seed of a fingerprint.
local function bloom_hashes_of(fingerprint)
  local a1, a2, a3, a4, a5, a6, b1, b2, b3, b4, b5, b6 = sbyte(fingerprint, 1, 12)
  local h1 = ((((a1 * 256 + a2) * 256 + a3) * 256 + a4) * 256 + a5) * 256 + a6
  local h2 = ((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6
  return h1, h2 % 2147483646 + 1
end

local function dedup_has(fingerprint)
  local h1, seed = bloom_hashes_of(fingerprint)
  for slice = 1, bloom_slices do
    local key, at = bloom_locate(slice, h1 % bloom_blocks[slice])
    local block = redis.call('GETRANGE', key, at, at + BLOCK - 1)
    if bloom_all_set(block, bloom_hashes[slice], seed) then
      return true
    end
  end
  return false
end

local function dedup_add(fingerprint)
  local h1, seed = bloom_hashes_of(fingerprint)
  if bloom_count >= bloom_capacity[bloom_slices] and bloom_slices < #bloom_blocks then
    bloom_slices, bloom_count, bloom_changed = bloom_slices + 1, 0, true
    bloom_allocate(bloom_slices)
  end
  local key, at, block
  for slice = 1, bloom_slices do
    key, at = bloom_locate(slice, h1 % bloom_blocks[slice])
    block = redis.call('GETRANGE', key, at, at + BLOCK - 1)
    if bloom_all_set(block, bloom_hashes[slice], seed) then
      return false
    end
  end
  redis.call('SETRANGE', key, at, bloom_with_bits(block, bloom_hashes[bloom_slices], seed))
  bloom_count, bloom_changed = bloom_count + 1, true
  return true
end

local function dedup_close()
  if bloom_changed then
    redis.call('HSET', KEYS[7], 'slices', bloom_slices, 'count', bloom_count)
  end
end
