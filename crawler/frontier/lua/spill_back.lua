-- Messages read back from one partition of the Kafka backlog, atomically: the requests queued
-- again at the tail of their levels (no dedup: they were recorded when first queued), the
-- messages that were not spilled requests recorded as failed, and the part's next offset to
-- read back moved past them, which takes them off its backlog count. Messages below that
-- offset were taken already by a reader that died before committing them: they are skipped,
-- neither queued nor counted twice. The partition's high watermark moves the next offset
-- written forward (a node that died between Kafka's acknowledgement and spill_done.lua left it
-- behind); one below the next offset to read means the topic was made again (deleted by
-- hand) before a node's look found it (lua/backlog_mend.lua): its offsets start over, the
-- requests that waited in the topic that was said lost, as the look says them. A message of a
-- spill that put its request back in the queue not knowing whether Kafka wrote it (its key,
-- '<spill id>:<lease id>', in the unsure hash) is skipped too: the request is queued already.
-- lua/queue.lua and lua/backlog_count.lua come before this body.
-- KEYS: 1 queue levels, 2 queue count, 3 backlog (count), 4 failed (hash id -> failure JSON),
--       5 backlog read, 6 backlog written (hashes topic -> offset), 7 unsure (hash message key -> 1)
-- ARGV: 1 topic, 2 the partition's high watermark (-1: unknown), 3 the failure ids' prefix,
--       then quadruples offset, key, score (an integer's text; '' for a message that is not a
--       spilled request), request as stored (or that message's failure JSON)
-- Returns {queued, failed, skipped, 1 if the offsets started over else 0, the messages between
-- the next offset and the first one read that were never read back: lost, the requests that
-- waited in a topic made again: lost, skipped as put back in the queue already}.
local topic, high, restarted, topic_lost = ARGV[1], tonumber(ARGV[2]), 0, 0
local recorded = redis.call('HEXISTS', KEYS[5], topic) == 1
local next_offset = backlog_offset(KEYS[5], topic)
if high >= 0 and high < next_offset then
  topic_lost = backlog_start_over(KEYS[3], KEYS[5], KEYS[6], topic, high)
  next_offset, restarted = 0, 1
elseif high > backlog_offset(KEYS[6], topic) then
  redis.call('HSET', KEYS[6], topic, high)
end
local scores, bodies, failures, skipped, last = {}, {}, {}, 0, next_offset - 1
local requeued = 0  -- messages of requests a spill put back in the queue: skipped
local first = nil  -- the first offset not read back before
for n = 4, #ARGV, 4 do
  local offset = tonumber(ARGV[n])
  if offset >= next_offset and (first == nil or offset < first) then
    first = offset
  end
  if offset < next_offset then
    skipped = skipped + 1
  elseif ARGV[n + 1] ~= '' and redis.call('HDEL', KEYS[7], ARGV[n + 1]) == 1 then
    requeued = requeued + 1
  elseif ARGV[n + 2] == '' then
    failures[#failures + 1], failures[#failures + 2] = ARGV[3] .. ARGV[n], ARGV[n + 3]
  else
    scores[#scores + 1], bodies[#bodies + 1] = ARGV[n + 2], ARGV[n + 3]
  end
  if offset > last then
    last = offset
  end
end
for from = 1, #failures, 1000 do
  redis.call('HSET', KEYS[4], unpack(failures, from, math.min(#failures, from + 999)))
end
local count = queue_push(KEYS[1], KEYS[2], scores, bodies, false)
redis.call('HSET', KEYS[5], topic, last + 1)
backlog_recount(KEYS[3], KEYS[5], KEYS[6])
local gap = 0  -- messages after the next offset never read back (deleted by the retention?)
if recorded and restarted == 0 and first ~= nil and first > next_offset then
  gap = first - next_offset
end
return {count, #failures / 2, skipped, restarted, gap, topic_lost, requeued}
