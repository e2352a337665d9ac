-- Requests read back from the Kafka backlog: queue them again at the tail of their levels (no
-- dedup: they were recorded when first queued) and take them off the part's backlog count,
-- atomically. lua/queue.lua comes before this body.
-- KEYS: 1 queue levels, 2 queue count, 3 backlog (counter)
-- ARGV: pairs score (an integer's text), request JSON
-- Returns the number queued.
local scores, bodies = {}, {}
for n = 1, #ARGV, 2 do
  scores[#scores + 1], bodies[#bodies + 1] = ARGV[n], ARGV[n + 1]
end
local count = queue_push(KEYS[1], KEYS[2], scores, bodies, false)
if count > 0 and tonumber(redis.call('DECRBY', KEYS[3], count)) < 0 then
  redis.call('SET', KEYS[3], 0)
end
return count
