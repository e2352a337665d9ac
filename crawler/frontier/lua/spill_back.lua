-- Messages read back from one partition of the Kafka backlog, atomically: the requests queued
-- again at the tail of their levels (no dedup: they were recorded when first queued), the
-- messages that were not spilled requests recorded as failed, all of them taken off the part's
-- backlog count, and the part's next offset to read back moved past them. Messages below that
-- offset were taken already by a reader that died before committing them: they are skipped,
-- neither queued nor counted twice. A high watermark below it means the topic was made again
-- (deleted by hand): its offsets start over, and so does the next offset.
-- lua/queue.lua comes before this body.
-- KEYS: 1 queue levels, 2 queue count, 3 backlog (counter), 4 failed (hash id -> failure JSON),
--       5 backlog read (hash topic -> next offset)
-- ARGV: 1 topic, 2 the partition's high watermark (-1: unknown), 3 the failure ids' prefix,
--       then triples offset, score (an integer's text; '' for a message that is not a spilled
--       request), request as stored (or that message's failure JSON)
-- Returns {queued, failed, skipped, 1 if the next offset started over else 0}.
local next_offset = tonumber(redis.call('HGET', KEYS[5], ARGV[1]) or '0')
local high, restarted = tonumber(ARGV[2]), 0
if high >= 0 and high < next_offset then
  next_offset, restarted = 0, 1
end
local scores, bodies, failures, skipped, last = {}, {}, {}, 0, next_offset - 1
for n = 4, #ARGV, 3 do
  local offset = tonumber(ARGV[n])
  if offset < next_offset then
    skipped = skipped + 1
  elseif ARGV[n + 1] == '' then
    failures[#failures + 1], failures[#failures + 2] = ARGV[3] .. ARGV[n], ARGV[n + 2]
  else
    scores[#scores + 1], bodies[#bodies + 1] = ARGV[n + 1], ARGV[n + 2]
  end
  if offset > last then
    last = offset
  end
end
for from = 1, #failures, 1000 do
  redis.call('HSET', KEYS[4], unpack(failures, from, math.min(#failures, from + 999)))
end
local count = queue_push(KEYS[1], KEYS[2], scores, bodies, false)
local taken = count + #failures / 2
if taken > 0 then
  redis.call('DECRBY', KEYS[3], taken)
end
if last >= next_offset then
  redis.call('HSET', KEYS[5], ARGV[1], last + 1)
elseif restarted == 1 then
  redis.call('HDEL', KEYS[5], ARGV[1])
end
return {count, #failures / 2, skipped, restarted}
