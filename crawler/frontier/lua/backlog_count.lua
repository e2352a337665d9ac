-- The part's backlog count (KEYS given as `count`) as the offsets say it: for each topic
-- spilled to, the next offset written to its partition (hash `written`, topic -> offset) less
-- the next one to read back (hash `read`), never below 0, summed over the topics (nodes given
-- different FRONTIER_BACKLOG_TOPICs, each found and stopped but one: what waits in any topic
-- keeps the crawl from ending). Each offset is only ever moved forward (or, for a topic made
-- again, started over by backlog_start_over), so the count mends itself whatever order the
-- nodes' calls land in, and wherever a node dies between Kafka and Redis.
local function backlog_offset(hash, topic)
  return tonumber(redis.call('HGET', hash, topic) or '0')
end

local function backlog_recount(count, read, written)
  local offsets, waiting = redis.call('HGETALL', written), 0
  for n = 1, #offsets, 2 do
    waiting = waiting + math.max(0, tonumber(offsets[n + 1]) - backlog_offset(read, offsets[n]))
  end
  redis.call('SET', count, waiting)
end

-- The topic was made again (deleted by hand): the part's offsets start over in the topic as it
-- is (`high`: its partition's high watermark; its messages, from 0, wait to be read back).
-- Returns the requests that waited in the topic that was: lost.
local function backlog_start_over(count, read, written, topic, high)
  local lost = math.max(0, backlog_offset(written, topic) - backlog_offset(read, topic))
  redis.call('HSET', read, topic, 0)
  redis.call('HSET', written, topic, high)
  backlog_recount(count, read, written)
  return lost
end
