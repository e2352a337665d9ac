-- The queue of one part of the frontier (docs/redis-keys.md), the snippet every script that
-- changes it puts before its body: a list of stored requests (crawler.frontier.codec: JSON,
-- compressed or not; never read here) per priority level,
-- '<tag>:queue:<score>' (score: -priority, an integer's text), its head leased first; the levels
-- in the sorted set '<tag>:queue:levels' (member and score: the level's score); the number of
-- requests in all the lists in the string '<tag>:queue:count'. Bodies stay in the lists, so a
-- request costs a list entry: no id, hash entry or sorted-set entry until it is leased.
local QUEUE_CHUNK = 1000  -- items per variadic command (unpack takes at most a few thousand)

-- Flat list `items` in variadic `command`s on `key`, `per` items an entry.
local function in_chunks(command, key, items, per)
  for from = 1, #items, per * QUEUE_CHUNK do
    redis.call(command, key, unpack(items, from, math.min(#items, from + per * QUEUE_CHUNK - 1)))
  end
end

-- The list of the level `score` ('<tag>:queue:levels' -> '<tag>:queue:<score>').
local function queue_list(levels, score)
  return string.sub(levels, 1, -7) .. score
end

-- Add `bodies` to the queue, `scores[i]` the level of `bodies[i]`: at the tail of each level, or
-- at its head (`head`: leases returned, which were at the head when taken), keeping their order.
-- Returns the number added.
local function queue_push(levels, count, scores, bodies, head)
  local by_level, order = {}, {}
  for i, score in ipairs(scores) do
    local list = by_level[score]
    if not list then
      list = {}
      by_level[score], order[#order + 1] = list, score
    end
    list[#list + 1] = bodies[i]
  end
  for _, score in ipairs(order) do
    local list = by_level[score]
    if head then  -- LPUSH puts its arguments at the head one by one: the last one first
      local reversed = {}
      for i = #list, 1, -1 do
        reversed[#reversed + 1] = list[i]
      end
      list = reversed
    end
    in_chunks(head and 'LPUSH' or 'RPUSH', queue_list(levels, score), list, 1)
    redis.call('ZADD', levels, score, score)
  end
  if #bodies > 0 then
    redis.call('INCRBY', count, #bodies)
  end
  return #bodies
end

-- Take up to `want` requests off the queue: from the head of the lowest level (the highest
-- priority), or from the tail of the highest one (`tail`: spilling). Appends each one's body and
-- level to `bodies` and `scores`; returns how many.
local function queue_take(levels, count, want, bodies, scores, tail)
  local taken = 0
  local rank, pop = tail and -1 or 0, tail and 'RPOP' or 'LPOP'
  while taken < want do
    local level = redis.call('ZRANGE', levels, rank, rank)[1]
    if not level then
      break
    end
    local left = want - taken
    local found = redis.call(pop, queue_list(levels, level), left) or {}
    for _, body in ipairs(found) do
      bodies[#bodies + 1], scores[#scores + 1] = body, level
    end
    taken = taken + #found
    if #found < left then  -- the list is empty (Redis deleted it)
      redis.call('ZREM', levels, level)
    end
  end
  if taken > 0 then
    redis.call('DECRBY', count, taken)
  end
  return taken
end

-- Requests queued in the part.
local function queue_length(count)
  return tonumber(redis.call('GET', count) or '0')
end

-- The owner, queue score and request JSON of an inflight record '<node>\t<score>\t<JSON>'.
local function lease_record(record)
  local first = string.find(record, '\t', 1, true)
  local second = string.find(record, '\t', first + 1, true)
  return string.sub(record, 1, first - 1), string.sub(record, first + 1, second - 1),
    string.sub(record, second + 1)
end

-- Redis time in ms.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Redis time in ms plus `ms` (text: it is passed to commands as is).
local function deadline_after(ms)
  return tostring(now_ms() + tonumber(ms))
end

-- Return leases already taken off leases and inflight (`ids`, their inflight `records`) to
-- the head of their levels, in the order they were leased (ids grow with every lease: the
-- order they had in the queue). Returns how many.
local function queue_return(levels, count, ids, records)
  local order = {}
  for n = 1, #ids do
    order[n] = n
  end
  table.sort(order, function(a, b) return ids[a] < ids[b] end)
  local scores, bodies = {}, {}
  for _, n in ipairs(order) do
    local _, score, body = lease_record(records[n])
    scores[#scores + 1], bodies[#bodies + 1] = score, body
  end
  return queue_push(levels, count, scores, bodies, true)
end

-- Return the leases that expired by `now` (ms, Redis time; of any node: an owner that stopped
-- extending them is dead or stalled), `most` at most, to the head of their levels, QUEUE_CHUNK
-- at a time. Returns returned, examined, owners: leases put back, expired ids looked at, and
-- node id -> how many of the leases put back were its (the record's first field).
local function queue_reclaim(leases, inflight, levels, count, now, most)
  local expired = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, most)
  local returned, owners = 0, {}
  for from = 1, #expired, QUEUE_CHUNK do
    local ids = {unpack(expired, from, math.min(#expired, from + QUEUE_CHUNK - 1))}
    local records = redis.call('HMGET', inflight, unpack(ids))
    redis.call('ZREM', leases, unpack(ids))
    redis.call('HDEL', inflight, unpack(ids))
    local back, found = {}, {}
    for n = 1, #ids do
      if records[n] then
        back[#back + 1], found[#found + 1] = ids[n], records[n]
        local owner = string.match(records[n], '^([^\t]*)\t') or ''
        owners[owner] = (owners[owner] or 0) + 1
      end
    end
    returned = returned + queue_return(levels, count, back, found)
  end
  return returned, #expired, owners
end
