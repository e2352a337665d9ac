-- One write of a node's reactor turn, atomically: finish leases, enqueue the new requests whose
-- fingerprints the dedup had not recorded (recording them), and lease more.
-- Put before this body (crawler.frontier.dedup.DedupStep.script): lua/queue.lua, lua/lease.lua
-- and the dedup snippet of FRONTIER_DUPEFILTER (lua/dedup_*.lua), which defines DEDUP_ARGC,
-- dedup_open(), dedup_close(), dedup_feedback() (a text for the node, '' for none), and either
-- dedup_add_many(list of fingerprints) (a list of true: new, now recorded / false), or
-- dedup_add_many = false and dedup_add(fingerprint).
-- KEYS: 1 queue levels, 2 queue count, 3 seq, 4 leases (zset id -> deadline ms), 5 inflight
--       (hash id -> '<node>\t<score>\t<JSON>'), 6 failed (hash id -> failure JSON), 7.. the
--       dedup snippet's keys, then: the node's write mark, the nodes waiting for work (zset
--       node -> until, ms), the node's lease fence
-- ARGV: 1 lease ids to finish, comma-separated ('' = none), 2 node id, 3 their outcomes,
--       comma-separated: done | failed | requeue, 4 their failure records (JSON, outcome
--       failed), newline-separated ('' for the others), 5..4+DEDUP_ARGC the dedup snippet's
--       arguments, then 4: requests to lease (0: none), the lease time (ms), the lease call id (a
--       call sent again after its reply was lost gets the leases the first one took, not more),
--       the node's idle poll (ms; 0: the node still holds requests, see lease_share), the
--       call's token (microseconds, rising with each call of the node), then triples: fingerprint ('' = never deduplicated), score (-priority, an integer's text;
--       'F' before it: enqueue even if seen, recording the fingerprint, as for a seed), JSON.
-- Returns {statuses, added, dropped, leased, queued, feedback, mark}: statuses per lease finished: its outcome,
-- 'gone' (the lease no longer exists) or 'stolen' (another node holds it now); dropped: the
-- 0-based positions of the requests found already seen; leased: id1, JSON1, id2, ...; queued:
-- the part's queue length after the call; feedback: the dedup snippet's text for the node;
-- mark: the node's write mark before the call ('' = none): the highest token of its calls.
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
local prefix = node .. '\t'
local statuses = {}
if ARGV[1] ~= '' then
  local ids, outcomes, failures = split(ARGV[1], ','), split(ARGV[3], ','), split(ARGV[4], '\n')
  local records = {}
  for from = 1, #ids, QUEUE_CHUNK do
    local to = math.min(#ids, from + QUEUE_CHUNK - 1)
    for n, record in ipairs(redis.call('HMGET', KEYS[5], unpack(ids, from, to))) do
      records[from + n - 1] = record
    end
  end
  local finished, failed, returned, records_back, settled = {}, {}, {}, {}, {}
  for n, id in ipairs(ids) do
    local outcome, status, record = outcomes[n], 'gone', records[n]
    if record and not settled[id] then
      if string.sub(record, 1, #prefix) ~= prefix then
        status = 'stolen'
      else
        settled[id] = true
        finished[#finished + 1] = id
        if outcome == 'requeue' then
          returned[#returned + 1], records_back[#records_back + 1] = id, record
        elseif outcome == 'failed' then
          failed[#failed + 1], failed[#failed + 2] = id, failures[n]
        end
        status = outcome
      end
    end
    statuses[n] = status
  end
  in_chunks('ZREM', KEYS[4], finished, 1)
  in_chunks('HDEL', KEYS[5], finished, 1)
  in_chunks('HSET', KEYS[6], failed, 2)
  queue_return(KEYS[1], KEYS[2], returned, records_back)
end

-- How many of `want` requests a lease takes of the `queued` ones, with other nodes waiting for
-- work (found the queue empty when their buffers ran dry). A node that still holds requests
-- (`idle_ms` 0) leaves them their share: an even split, rounded down for itself, so a write
-- does not lease every link it just added while they poll in vain. A node whose buffer ran dry
-- takes its even share rounded up, and is recorded as waiting if it finds nothing, for three of
-- its polls (`idle_ms` apart); it is no longer waiting once it leases.
local function lease_share(waiting, node, want, queued, idle_ms)
  local now = nil
  local others = 0
  if redis.call('EXISTS', waiting) == 1 then
    now = now_ms()
    redis.call('ZREMRANGEBYSCORE', waiting, '-inf', now)
    redis.call('ZREM', waiting, node)
    others = redis.call('ZCARD', waiting)
  end
  local share = want
  if others > 0 then
    local even = queued / (others + 1)
    share = math.min(want, idle_ms > 0 and math.ceil(even) or math.floor(even))
  end
  if idle_ms > 0 and math.min(share, queued) == 0 then
    redis.call('ZADD', waiting, (now or now_ms()) + 3 * idle_ms, node)
    -- the key goes when its last node stops waiting, whether or not anyone leases after it
    redis.call('PEXPIREAT', waiting, redis.call('ZRANGE', waiting, -1, -1, 'WITHSCORES')[2])
  end
  return share
end

local lease_at = 5 + DEDUP_ARGC
local first = lease_at + 5
local added, dropped = 0, {}
if #ARGV >= first then
  dedup_open()
  local fingerprints = {}
  for i = first, #ARGV, 3 do
    fingerprints[#fingerprints + 1] = ARGV[i]
  end
  local new = dedup_add_all(fingerprints)
  dedup_close()
  local scores, bodies = {}, {}
  for n = 1, #fingerprints do
    local score = ARGV[first + 3 * n - 2]
    local forced = string.byte(score, 1) == 70  -- 'F'
    if new[n] or forced then
      scores[#scores + 1] = forced and string.sub(score, 2) or score
      bodies[#bodies + 1] = ARGV[first + 3 * n - 1]
    else
      dropped[#dropped + 1] = n - 1
    end
  end
  added = queue_push(KEYS[1], KEYS[2], scores, bodies, false)
end

local leased = {}
local want, lease_ms, call = tonumber(ARGV[lease_at]), ARGV[lease_at + 1], ARGV[lease_at + 2]
if want > 0 then
  local fence_key = KEYS[#KEYS]
  local fence = redis.call('GET', fence_key)
  local sep = fence and string.find(fence, '\n', 1, true)
  if fence and string.sub(fence, 1, sep - 1) == call then  -- sent again: the first call's leases
    local ids = split(string.sub(fence, sep + 1), ',')
    if ids[1] ~= '' then
      for from = 1, #ids, QUEUE_CHUNK do
        local to = math.min(#ids, from + QUEUE_CHUNK - 1)
        for n, record in ipairs(redis.call('HMGET', KEYS[5], unpack(ids, from, to))) do
          if record and string.sub(record, 1, #prefix) == prefix then
            local _, _, body = lease_record(record)
            leased[#leased + 1], leased[#leased + 2] = ids[from + n - 1], body
          end
        end
      end
    end
  else
    local idle_ms = tonumber(ARGV[lease_at + 3])
    local share = lease_share(KEYS[#KEYS - 1], node, want, queue_length(KEYS[2]), idle_ms)
    local bodies, scores = {}, {}
    queue_take(KEYS[1], KEYS[2], share, bodies, scores, false)
    local deadline = deadline_after(lease_ms)
    local ids = lease_bodies(KEYS[3], KEYS[4], KEYS[5], bodies, scores, node, deadline, leased, false)
    redis.call('SET', fence_key, call .. '\n' .. table.concat(ids, ','), 'PX', lease_ms)
  end
end
local feedback = #ARGV >= first and dedup_feedback() or ''
-- The node compares the mark with the tokens of the calls it knew applied before this one: a
-- lower mark means Redis lost writes it had acknowledged (a failover to a replica behind it, a
-- restart from an older snapshot).
local mark_key, token = KEYS[#KEYS - 2], ARGV[lease_at + 4]
local mark = redis.call('GET', mark_key)
if not mark or tonumber(mark) < tonumber(token) then
  redis.call('SET', mark_key, token, 'PX', 86400000)
end
return {statuses, added, dropped, leased, queue_length(KEYS[2]), feedback, mark or ''}
