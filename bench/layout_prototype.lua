-- bench.layout_prototype's write script: a layout of the frontier not built yet, to measure what
-- it would cost Redis before building it. Exact dedup, one priority level; no failed or requeued
-- outcomes, no resend of a lost reply, no reclaim. Not the frontier (crawler/frontier/lua).
-- Bodies travel and are kept framed: each one after its length (2 bytes, big-endian), since a
-- compressed body may hold any byte.
-- Queue: a list whose entries each hold the bodies one write queued, '<n>\n<framed bodies>'.
-- Leases: a batch of a lease call is one record: 'inflight' fields '<id>' = '<node>\t<mask>' (a
-- '0' or '1' per request: finished) and '<id>:r' = its framed bodies; 'leases' (zset id ->
-- deadline ms). A lease id given to the node is '<batch id>.<position from 1>'.
-- KEYS: 1 dedup set, 2 queue, 3 queue count, 4 seq, 5 leases, 6 inflight, 7 the node's fence,
--       8 the nodes waiting for work
-- ARGV: 1 node, 2 lease ids to finish (comma-separated), 3 fingerprints of the requests to
--       queue, 12 bytes each, concatenated, 4 their bodies, framed, 5 requests to lease,
--       6 lease ms, 7 lease call id
-- Returns {dropped (0-based positions found seen), added, {batch id, count, bodies} or {}}.
local node = ARGV[1]

-- Where the framed body at `at` ends.
local function body_end(bodies, at)
  local high, low = string.byte(bodies, at, at + 1)
  return at + 1 + high * 256 + low
end

if ARGV[2] ~= '' then
  local positions, batches = {}, {}
  for id in string.gmatch(ARGV[2], '[^,]+') do
    local dot = string.find(id, '.', 1, true)
    local batch, position = string.sub(id, 1, dot - 1), tonumber(string.sub(id, dot + 1))
    if not positions[batch] then
      positions[batch], batches[#batches + 1] = {}, batch
    end
    table.insert(positions[batch], position)
  end
  local records = redis.call('HMGET', KEYS[6], unpack(batches))
  local fields, done = {}, {}
  for n, batch in ipairs(batches) do
    local record = records[n]
    local tab = record and string.find(record, '\t', 1, true)
    if record and string.sub(record, 1, tab - 1) == node then
      local mask = {string.byte(record, tab + 1, -1)}
      for _, position in ipairs(positions[batch]) do
        mask[position] = 49  -- '1'
      end
      local finished = string.char(unpack(mask))
      if string.find(finished, '0', 1, true) then
        redis.call('HSET', KEYS[6], batch, node .. '\t' .. finished)
      else
        fields[#fields + 1], fields[#fields + 2] = batch, batch .. ':r'
        done[#done + 1] = batch
      end
    end
  end
  if #done > 0 then
    redis.call('HDEL', KEYS[6], unpack(fields))
    redis.call('ZREM', KEYS[5], unpack(done))
  end
end

local added, dropped = 0, {}
local count = #ARGV[3] / 12
if count > 0 then
  local fingerprints = {}
  for i = 1, count do
    fingerprints[i] = string.sub(ARGV[3], 12 * i - 11, 12 * i)
  end
  local seen = redis.call('SMISMEMBER', KEYS[1], unpack(fingerprints))
  local entry = ARGV[4]
  for i = 1, count do
    if seen[i] == 1 then
      dropped[#dropped + 1] = i - 1
    end
  end
  if #dropped > 0 then  -- another node queued some since the node's check: leave them out
    local bodies, new, at = {}, {}, 1
    for i = 1, count do
      local last = body_end(ARGV[4], at)
      if seen[i] == 0 then
        bodies[#bodies + 1], new[#new + 1] = string.sub(ARGV[4], at, last), fingerprints[i]
      end
      at = last + 1
    end
    entry, fingerprints = table.concat(bodies), new
  end
  if #fingerprints > 0 then
    redis.call('SADD', KEYS[1], unpack(fingerprints))
    redis.call('RPUSH', KEYS[2], #fingerprints .. '\n' .. entry)
    redis.call('INCRBY', KEYS[3], #fingerprints)
    added = #fingerprints
  end
end

local lease = {}
local want = tonumber(ARGV[5])
if want > 0 then
  redis.call('EXISTS', KEYS[8])  -- the frontier's share check reads these two
  redis.call('GET', KEYS[3])
  local taken, parts = 0, {}
  while taken < want do
    local entry = redis.call('LPOP', KEYS[2])
    if not entry then
      break
    end
    local head = string.find(entry, '\n', 1, true)
    local held, left = tonumber(string.sub(entry, 1, head - 1)), want - taken
    if held <= left then
      parts[#parts + 1], taken = string.sub(entry, head + 1), taken + held
    else  -- take `left` bodies, put the rest back at the head
      local at = head + 1
      for _ = 1, left do
        at = body_end(entry, at) + 1
      end
      parts[#parts + 1] = string.sub(entry, head + 1, at - 1)
      redis.call('LPUSH', KEYS[2], (held - left) .. '\n' .. string.sub(entry, at))
      taken = want
    end
  end
  if taken > 0 then
    redis.call('DECRBY', KEYS[3], taken)
    local batch = string.format('%012x', redis.call('INCR', KEYS[4]))
    local bodies = table.concat(parts)
    local now = redis.call('TIME')
    local deadline = now[1] * 1000 + math.floor(now[2] / 1000) + tonumber(ARGV[6])
    redis.call('ZADD', KEYS[5], deadline, batch)
    redis.call('HSET', KEYS[6], batch, node .. '\t' .. string.rep('0', taken), batch .. ':r', bodies)
    redis.call('SET', KEYS[7], ARGV[7] .. '\n' .. batch, 'PX', ARGV[6])
    lease = {batch, taken, bodies}
  end
end
return {dropped, added, lease}
