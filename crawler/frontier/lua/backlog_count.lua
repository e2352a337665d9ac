-- The part's backlog count (KEYS given as `count`) as the offsets say it: the next offset
-- written to the topic's partition (hash `written`, topic -> offset) less the next one to read
-- back (hash `read`), never below 0. Each is only ever moved forward (or, for a topic made
-- again, reset by spill_back.lua), so the count mends itself whatever order the nodes' calls
-- land in, and wherever a node dies between Kafka and Redis.
local function backlog_offset(hash, topic)
  return tonumber(redis.call('HGET', hash, topic) or '0')
end

local function backlog_recount(count, read, written, topic)
  local waiting = backlog_offset(written, topic) - backlog_offset(read, topic)
  redis.call('SET', count, math.max(0, waiting))
end
