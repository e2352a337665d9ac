-- Finish leases (if any) and enqueue new requests, atomically.
-- crawler.frontier.dedup puts the dedup snippet of FRONTIER_DUPEFILTER (lua/dedup_*.lua) before
-- this body: it defines DEDUP_ARGC and dedup_open(), dedup_add(fingerprint) (true: new, now
-- recorded), dedup_close().
-- KEYS: 1 queue, 2 data, 3 seq (counter), 4 leases, 5 inflight, 6 failed (hash id -> failure
--       JSON), 7.. the dedup snippet's keys
-- ARGV: 1 lease ids, comma-separated ('' = none), 2 node id, 3 their outcomes, comma-separated:
--       done | failed | requeue, 4 their failure records (JSON, outcome failed), one per lease,
--       newline-separated ('' for the others), 5..4+DEDUP_ARGC the dedup snippet's arguments,
--       then triples: fingerprint ('' = never deduplicated), score (-priority; 'F' before it:
--       enqueue even if seen, recording the fingerprint, as for a seed), request JSON.
-- Returns {statuses, added, dropped}: per lease its outcome, 'gone' (the lease no longer
-- exists) or 'stolen' (another node holds it now); dropped lists the 0-based positions of the
-- requests found already seen.
local function split(text, separator)
  local parts, from = {}, 1
  while true do
    local at = string.find(text, separator, from, true)
    if not at then
      parts[#parts + 1] = string.sub(text, from)
      return parts
    end
    parts[#parts + 1] = string.sub(text, from, at - 1)
    from = at + 1
  end
end

local node = ARGV[2]
local statuses = {}
if ARGV[1] ~= '' then
  local leases, outcomes, failures = split(ARGV[1], ','), split(ARGV[3], ','), split(ARGV[4], '\n')
  for n, lease in ipairs(leases) do
    local outcome, status = outcomes[n], 'gone'
    local record = redis.call('HGET', KEYS[5], lease)
    if record then
      local tab = string.find(record, '\t', 1, true)
      if string.sub(record, 1, tab - 1) ~= node then
        status = 'stolen'
      else
        redis.call('ZREM', KEYS[4], lease)
        redis.call('HDEL', KEYS[5], lease)
        if outcome == 'requeue' then
          redis.call('ZADD', KEYS[1], string.sub(record, tab + 1), lease)
        else
          if outcome == 'failed' then
            redis.call('HSET', KEYS[6], lease, failures[n])
          end
          redis.call('HDEL', KEYS[2], lease)
        end
        status = outcome
      end
    end
    statuses[n] = status
  end
end
local first = 5 + DEDUP_ARGC
local added, dropped = 0, {}
if #ARGV >= first then
  dedup_open()
  local bodies, scores = {}, {}
  for i = first, #ARGV, 3 do
    local fingerprint, score = ARGV[i], ARGV[i + 1]
    local forced = string.byte(score, 1) == 70 -- 'F'
    if forced then
      score = string.sub(score, 2)
    end
    local new = fingerprint == '' or dedup_add(fingerprint)
    if new or forced then
      added = added + 1
      bodies[added], scores[added] = ARGV[i + 2], score
    else
      dropped[#dropped + 1] = (i - first) / 3
    end
  end
  dedup_close()
  -- The new requests' ids (in order) from one INCRBY; their data and queue entries written
  -- with one HSET and one ZADD per CHUNK requests (fewer calls: most of a call's cost).
  local CHUNK = 1000
  local next_id = added > 0 and redis.call('INCRBY', KEYS[3], added) - added + 1 or 0
  for from = 1, added, CHUNK do
    local data, queue = {}, {}
    for k = from, math.min(added, from + CHUNK - 1) do
      local id = string.format('%012x', next_id + k - 1)
      data[#data + 1], data[#data + 2] = id, bodies[k]
      queue[#queue + 1], queue[#queue + 2] = scores[k], id
    end
    redis.call('HSET', KEYS[2], unpack(data))
    redis.call('ZADD', KEYS[1], unpack(queue))
  end
end
return {statuses, added, dropped}
