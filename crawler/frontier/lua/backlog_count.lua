-- The part's backlog count (KEYS given as `count`) as the offsets say it: the next offset
-- written to the topic's partition (hash `written`, topic -> offset) less the next one to read
-- back (hash `read`), never below 0. Each is only ever moved forward (or, for a topic made
-- again, started over by backlog_start_over), so the count mends itself whatever order the
-- nodes' calls land in, and wherever a node dies between Kafka and Redis.
local function backlog_offset(hash, topic)
  return tonumber(redis.call('HGET', hash, topic) or '0')
end

local function backlog_recount(count, read, written, topic)
  local waiting = backlog_offset(written, topic) - backlog_offset(read, topic)
  redis.call('SET', count, math.max(0, waiting))
end

-- The topic was made again (deleted by hand): the part's offsets start over in the topic as it
-- is (`high`: its partition's high watermark; its messages, from 0, wait to be read back).
-- Returns the requests that waited in the topic that was: lost.
local function backlog_start_over(count, read, written, topic, high)
  local lost = math.max(0, backlog_offset(written, topic) - backlog_offset(read, topic))
  redis.call('HSET', read, topic, 0)
  redis.call('HSET', written, topic, high)
  backlog_recount(count, read, written, topic)
  return lost
end
