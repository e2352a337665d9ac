-- Messages read back from the Kafka backlog, atomically: the requests queued again at the tail
-- of their levels (no dedup: they were recorded when first queued), the messages that were not
-- spilled requests recorded as failed, and all of them taken off the part's backlog count.
-- lua/queue.lua comes before this body.
-- KEYS: 1 queue levels, 2 queue count, 3 backlog (counter), 4 failed (hash id -> failure JSON)
-- ARGV: 1 the number n of failures, then n pairs failure id, failure JSON, then pairs score (an
--       integer's text), request (as stored)
-- Returns the number queued.
local failures = tonumber(ARGV[1])
local scores, bodies = {}, {}
for n = 2 + 2 * failures, #ARGV, 2 do
  scores[#scores + 1], bodies[#bodies + 1] = ARGV[n], ARGV[n + 1]
end
if failures > 0 then
  redis.call('HSET', KEYS[4], unpack(ARGV, 2, 1 + 2 * failures))
end
local count = queue_push(KEYS[1], KEYS[2], scores, bodies, false)
local taken = count + failures
if taken > 0 and tonumber(redis.call('DECRBY', KEYS[3], taken)) < 0 then
  redis.call('SET', KEYS[3], 0)
end
return count
