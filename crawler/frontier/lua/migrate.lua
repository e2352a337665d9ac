-- Move one step of a part's requests from the layout before the queue's lists (`crawler
-- migrate`, crawler.frontier.layout): the queue was a sorted set of request ids (score:
-- -priority), the request JSON a hash by id, an inflight record '<node>\t<score>'.
-- lua/queue.lua comes before this body.
-- KEYS: 1 old queue, 2 old data, 3 inflight, 4 queue levels, 5 queue count, 6 leases
-- ARGV: 1 'queue': move up to ARGV[2] queued requests, head first, to the tail of their levels;
--       'leases': rewrite the inflight records of the lease ids ARGV[2..] as
--       '<node>\t<score>\t<JSON>'; 'orphans': delete the old data hash (run last: what is left
--       belongs to no queued or leased request)
-- Returns {moved, missing}: requests moved, and ids that had no JSON (dropped) or, for
-- 'orphans', the entries deleted.
local function canonical(score)
  local n = tonumber(score) + 0  -- -0 + 0 is 0: one level for priority 0
  if n == math.floor(n) then
    return string.format('%d', n)
  end
  return tostring(n)
end

local moved, missing = 0, 0
if ARGV[1] == 'queue' then
  local picked = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
  if #picked == 0 then
    return {0, 0}
  end
  local ids, scores = {}, {}
  for i = 1, #picked, 2 do
    ids[#ids + 1], scores[#scores + 1] = picked[i], canonical(picked[i + 1])
  end
  local found = redis.call('HMGET', KEYS[2], unpack(ids))
  local kept_scores, bodies = {}, {}
  for n = 1, #ids do
    if found[n] then
      kept_scores[#kept_scores + 1], bodies[#bodies + 1] = scores[n], found[n]
    else
      missing = missing + 1
    end
  end
  moved = queue_push(KEYS[4], KEYS[5], kept_scores, bodies, false)
  redis.call('ZREM', KEYS[1], unpack(ids))
  redis.call('HDEL', KEYS[2], unpack(ids))
elseif ARGV[1] == 'leases' then
  local ids = {unpack(ARGV, 2)}
  if #ids == 0 then
    return {0, 0}
  end
  local records = redis.call('HMGET', KEYS[3], unpack(ids))
  local found = redis.call('HMGET', KEYS[2], unpack(ids))
  local rewritten, gone = {}, {}
  for n, id in ipairs(ids) do
    local record = records[n]
    local first = record and string.find(record, '\t', 1, true)
    if first and not string.find(record, '\t', first + 1, true) then  -- '<node>\t<score>'
      if found[n] then
        local score = canonical(string.sub(record, first + 1))
        rewritten[#rewritten + 1] = id
        rewritten[#rewritten + 1] = string.sub(record, 1, first) .. score .. '\t' .. found[n]
      else
        gone[#gone + 1] = id
      end
    end
  end
  if #rewritten > 0 then
    redis.call('HSET', KEYS[3], unpack(rewritten))
  end
  if #gone > 0 then  -- a lease without its request: nothing could ever finish or return it
    redis.call('HDEL', KEYS[3], unpack(gone))
    redis.call('ZREM', KEYS[6], unpack(gone))
  end
  redis.call('HDEL', KEYS[2], unpack(ids))
  moved, missing = #rewritten / 2, #gone
elseif ARGV[1] == 'orphans' then
  missing = redis.call('HLEN', KEYS[2])
  redis.call('DEL', KEYS[2])
end
return {moved, missing}
