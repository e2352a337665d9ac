-- Dedup snippet, mode bloom: a scalable, blocked Bloom filter in chunk strings
-- (crawler.frontier.dedup_bloom).
-- KEYS[7]: meta hash: 'layout' -> 'bytes+bytes+...:hashes:capacity' of every slice the filter
--   may have (its chunks' lengths), comma-separated (fixed when the filter is created);
--   'slices' -> slices in use; 'count' -> fingerprints added to the newest slice.
-- KEYS[8..]: the chunks, in the layout's order (slice 1's, then slice 2's, ...); each is
--   allocated whole when its slice comes into use and holds blocks of 256 bytes.
-- ARGV[5]: the layout of a new filter; ARGV[6]: the node's view of the filter, which the
--   fingerprints' positions were computed with (crawler.frontier.bloom_probe):
--   '<slices> <capacity of the newest> <1: the newest is the layout's last, else 0> <layout>',
--   or '' (none: the fingerprints are the 12 bytes alone).
-- Defines dedup_open/add_many/close/feedback (turn.lua) and dedup_peek_open/has (seen.lua).
-- Fingerprints arrive as bytes (at least 12). Bytes 1..6 (h1) choose the block of each slice:
-- h1 mod the slice's blocks, counted through its chunks; bytes 7..12 (h2) choose the bits in
-- it: `hashes` draws of the Park-Miller generator (s = s * 16807 mod 2^31 - 1, bit s mod 2048)
-- seeded with h2 mod (2^31 - 2) + 1.
-- A fingerprint is seen when all its bits are set in some slice; new ones go to the newest
-- slice. A full slice is followed by the next one of the layout; the last one takes more than
-- its capacity (its false-positive rate rises, as the reported estimate shows).
-- Positions from the node: after the 12 bytes, per slice in use (the view's), the chunk's key
-- (1 byte: KEYS[8 + it]), the block's first byte in the chunk (4 bytes, big-endian), the number
-- of bytes the fingerprint's bits touch in the block (1 byte), then per such byte, ascending,
-- its place in the block and the bits (2 bytes). When the view is the filter's (layout and
-- slices) and no slice can fill up in this call, the script reads and writes blocks where the
-- node says; else it computes the positions itself from the 12 bytes (the same ones).
local DEDUP_ARGC = 2
local BLOCK, BLOCK_BITS = 256, 2048
local sbyte, schar, ssub, floor = string.byte, string.char, string.sub, math.floor
local band, bor, lshift = bit.band, bit.bor, bit.lshift
-- Per slice: its blocks, hashes, capacity, and per chunk {key, blocks}.
local bloom_blocks, bloom_hashes, bloom_capacity, bloom_chunks = {}, {}, {}, {}
local bloom_slices, bloom_count, bloom_layout, bloom_exists
local bloom_changed, bloom_parsed, bloom_fast = false, false, false

local function bloom_allocate(slice)
  for _, chunk in ipairs(bloom_chunks[slice]) do
    redis.call('SETRANGE', chunk[1], chunk[2] * BLOCK - 1, '\0')
  end
end

-- Read the filter's layout and fill (a filter not created yet: ARGV[5]'s layout, no slice).
local function dedup_open()
  local meta = redis.call('HMGET', KEYS[7], 'layout', 'slices', 'count')
  bloom_layout, bloom_exists = meta[1] or ARGV[5], meta[1] ~= false
  bloom_slices, bloom_count = tonumber(meta[2]) or 0, tonumber(meta[3]) or 0
end

-- The layout's slices (read once a call, when the script computes positions itself).
local function bloom_parse()
  if bloom_parsed then
    return
  end
  bloom_parsed = true
  local key = 8
  for sizes, hashes, capacity in string.gmatch(bloom_layout, '([%d+]+):(%d+):(%d+)') do
    local chunks, blocks = {}, 0
    for size in string.gmatch(sizes, '%d+') do
      chunks[#chunks + 1] = {KEYS[key], math.max(1, floor(tonumber(size) / BLOCK))}
      blocks, key = blocks + chunks[#chunks][2], key + 1
    end
    local i = #bloom_blocks + 1
    bloom_blocks[i], bloom_chunks[i] = blocks, chunks
    bloom_hashes[i], bloom_capacity[i] = tonumber(hashes), tonumber(capacity)
  end
end

local function dedup_peek_open()
  dedup_open()
  bloom_parse()
end

-- A filter not created yet: its layout stored and its first slice allocated.
local function bloom_create()
  if not bloom_exists then
    redis.call('HSET', KEYS[7], 'layout', bloom_layout)
    bloom_slices, bloom_count, bloom_changed, bloom_exists = 1, 0, true, true
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

-- Whether the bytes the node named (pairs from `first` to `last` of `fingerprint`) have their
-- bits set in `block`.
local function bloom_pairs_set(block, fingerprint, first, last)
  for at = first, last, 2 do
    local place, bits = sbyte(fingerprint, at, at + 1)
    if band(sbyte(block, place + 1), bits) ~= bits then
      return false
    end
  end
  return true
end

-- `block` with those bits set: the unchanged runs and the changed bytes joined.
local function bloom_patched(block, fingerprint, first, last)
  local pieces, from = {}, 1
  for at = first, last, 2 do
    local place, bits = sbyte(fingerprint, at, at + 1)
    pieces[#pieces + 1] = ssub(block, from, place)
    pieces[#pieces + 1] = schar(bor(sbyte(block, place + 1), bits))
    from = place + 2
  end
  pieces[#pieces + 1] = ssub(block, from)
  return table.concat(pieces)
end

-- dedup_add at the positions the node computed (the view is the filter's).
local function bloom_add_at(fingerprint)
  local at, key, start, block, first, last = 13
  for _ = 1, bloom_slices do
    local index, s1, s2, s3, s4, touched = sbyte(fingerprint, at, at + 5)
    key, start = KEYS[8 + index], ((s1 * 256 + s2) * 256 + s3) * 256 + s4
    first, last = at + 6, at + 4 + 2 * touched
    block = redis.call('GETRANGE', key, start, start + BLOCK - 1)
    if #block == BLOCK and bloom_pairs_set(block, fingerprint, first, last) then
      return false
    end
    at = last + 2
  end
  if #block < BLOCK then  -- a chunk that is missing (deleted by hand): its bits start unset
    block = block .. string.rep('\0', BLOCK - #block)
  end
  redis.call('SETRANGE', key, start, bloom_patched(block, fingerprint, first, last))
  bloom_count, bloom_changed = bloom_count + 1, true
  return true
end

-- Whether each fingerprint is new ('' always is, and is not recorded), recording the new ones:
-- at the node's positions when its view (ARGV[6]) is the filter's and no slice fills up in
-- this call, else from the 12 bytes.
local function dedup_add_many(fingerprints)
  local slices, capacity, last, layout = string.match(ARGV[6], '^(%d+) (%d+) (%d) (.+)$')
  bloom_fast = bloom_exists and layout == bloom_layout and tonumber(slices) == bloom_slices
    and (last == '1' or bloom_count + #fingerprints <= tonumber(capacity))
  if not bloom_fast then
    bloom_parse()
    bloom_create()
  end
  local new = {}
  for n, fingerprint in ipairs(fingerprints) do
    if fingerprint == '' then
      new[n] = true
    elseif bloom_fast then
      new[n] = bloom_add_at(fingerprint)
    else
      new[n] = dedup_add(ssub(fingerprint, 1, 12))
    end
  end
  return new
end

local function dedup_close()
  if bloom_changed then
    redis.call('HSET', KEYS[7], 'slices', bloom_slices, 'count', bloom_count)
  end
end

-- For the node, after a call that did not use its positions: the filter as it is now,
-- '<slices> <count> <layout>' ('' when they were used, or no filter exists).
local function dedup_feedback()
  if bloom_fast or not bloom_exists then
    return ''
  end
  return bloom_slices .. ' ' .. bloom_count .. ' ' .. bloom_layout
end
