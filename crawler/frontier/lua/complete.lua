-- Finish leases (if any) and enqueue new requests, atomically.
-- crawler.frontier.dedup puts the dedup snippet of FRONTIER_DUPEFILTER (lua/dedup_*.lua) before
-- this body: it defines DEDUP_ARGC, dedup_open(), dedup_close(), and either dedup_add_many(list
-- of fingerprints) (a list of true: new, now recorded / false), or dedup_add_many = false and
-- dedup_add(fingerprint) (the same for one).
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

-- Flat list `items` in variadic `command`s on `key`, `per` items a call (a command called from
-- a script costs more than the entries it touches; unpack takes at most a few thousand).
local CHUNK = 1000
local function in_chunks(command, key, items, per)
  for from = 1, #items, per * CHUNK do
    redis.call(command, key, unpack(items, from, math.min(#items, from + per * CHUNK - 1)))
  end
end

-- Whether each fingerprint is new ('' always is, and is not recorded), recording the new ones.
local function dedup_add_all(fingerprints)
  if dedup_add_many then
    return dedup_add_many(fingerprints)
  end
  local new = {}
  for n, fingerprint in ipairs(fingerprints) do
    new[n] = fingerprint == '' or dedup_add(fingerprint)
  end
  return new
end

local node = ARGV[2]
local statuses = {}
if ARGV[1] ~= '' then
  local leases, outcomes, failures = split(ARGV[1], ','), split(ARGV[3], ','), split(ARGV[4], '\n')
  local records = {}
  for from = 1, #leases, CHUNK do
    local to = math.min(#leases, from + CHUNK - 1)
    for n, record in ipairs(redis.call('HMGET', KEYS[5], unpack(leases, from, to))) do
      records[from + n - 1] = record
    end
  end
  local finished, requeued, failed, dropped_data, settled = {}, {}, {}, {}, {}
  for n, lease in ipairs(leases) do
    local outcome, status, record = outcomes[n], 'gone', records[n]
    if record and not settled[lease] then
      local tab = string.find(record, '\t', 1, true)
      if string.sub(record, 1, tab - 1) ~= node then
        status = 'stolen'
      else
        settled[lease] = true
        finished[#finished + 1] = lease
        if outcome == 'requeue' then
          requeued[#requeued + 1], requeued[#requeued + 2] = string.sub(record, tab + 1), lease
        else
          if outcome == 'failed' then
            failed[#failed + 1], failed[#failed + 2] = lease, failures[n]
          end
          dropped_data[#dropped_data + 1] = lease
        end
        status = outcome
      end
    end
    statuses[n] = status
  end
  in_chunks('ZREM', KEYS[4], finished, 1)
  in_chunks('HDEL', KEYS[5], finished, 1)
  in_chunks('ZADD', KEYS[1], requeued, 2)
  in_chunks('HSET', KEYS[6], failed, 2)
  in_chunks('HDEL', KEYS[2], dropped_data, 1)
end
local first = 5 + DEDUP_ARGC
local added, dropped = 0, {}
if #ARGV >= first then
  dedup_open()
  local fingerprints = {}
  for i = first, #ARGV, 3 do
    fingerprints[#fingerprints + 1] = ARGV[i]
  end
  local new = dedup_add_all(fingerprints)
  dedup_close()
  local kept = {}  -- positions of the requests to enqueue
  for n = 1, #fingerprints do
    if new[n] or string.byte(ARGV[first + 3 * n - 2], 1) == 70 then -- score 'F...': forced
      kept[#kept + 1] = n
    else
      dropped[#dropped + 1] = n - 1
    end
  end
  added = #kept
  -- The new requests' ids (in order) from one INCRBY; their data and queue entries written
  -- with one HSET and one ZADD per CHUNK requests.
  if added > 0 then
    local next_id = redis.call('INCRBY', KEYS[3], added) - added
    local data, queue = {}, {}
    for k, n in ipairs(kept) do
      local id, score = string.format('%012x', next_id + k), ARGV[first + 3 * n - 2]
      if string.byte(score, 1) == 70 then
        score = string.sub(score, 2)
      end
      data[2 * k - 1], data[2 * k] = id, ARGV[first + 3 * n - 1]
      queue[2 * k - 1], queue[2 * k] = score, id
    end
    in_chunks('HSET', KEYS[2], data, 2)
    in_chunks('ZADD', KEYS[1], queue, 2)
  end
end
return {statuses, added, dropped}
