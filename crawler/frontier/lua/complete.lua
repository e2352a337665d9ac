-- Finish a lease (if any) and enqueue new requests, atomically.
-- KEYS: 1 queue, 2 data, 3 dupefilter (set of fingerprints), 4 seq (counter),
--       5 leases, 6 inflight, 7 failed (hash id -> failure JSON)
-- ARGV: 1 lease id ('' = none), 2 node id, 3 outcome: done | failed | requeue,
--       4 failure record JSON (outcome failed), then triples: fingerprint ('' = never
--       deduplicated), score (-priority), request JSON.
-- Returns {status, added, duplicates}; status is the outcome, 'none' (no lease given),
-- 'gone' (lease no longer exists) or 'stolen' (another node holds it now).
local lease, node, outcome = ARGV[1], ARGV[2], ARGV[3]
local status = 'none'
if lease ~= '' then
  local record = redis.call('HGET', KEYS[6], lease)
  if not record then
    status = 'gone'
  else
    local tab = string.find(record, '\t', 1, true)
    if string.sub(record, 1, tab - 1) ~= node then
      status = 'stolen'
    else
      redis.call('ZREM', KEYS[5], lease)
      redis.call('HDEL', KEYS[6], lease)
      if outcome == 'requeue' then
        redis.call('ZADD', KEYS[1], string.sub(record, tab + 1), lease)
      else
        if outcome == 'failed' then
          redis.call('HSET', KEYS[7], lease, ARGV[4])
        end
        redis.call('HDEL', KEYS[2], lease)
      end
      status = outcome
    end
  end
end
local added, duplicates = 0, 0
for i = 5, #ARGV, 3 do
  local fingerprint = ARGV[i]
  if fingerprint == '' or redis.call('SADD', KEYS[3], fingerprint) == 1 then
    local id = string.format('%012x', redis.call('INCR', KEYS[4]))
    redis.call('HSET', KEYS[2], id, ARGV[i + 2])
    redis.call('ZADD', KEYS[1], ARGV[i + 1], id)
    added = added + 1
  else
    duplicates = duplicates + 1
  end
end
return {status, added, duplicates}
