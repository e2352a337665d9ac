-- Heartbeat of node ARGV[1]: mark it alive, extend the leases it still holds, and return
-- expired leases (of any node: an owner that stopped extending is dead or stalled) to the head
-- of their level of the queue, unless this node's own beat is late (see kept_away).
-- lua/queue.lua comes before this body.
-- KEYS: 1 nodes (zset node -> alive-until ms), 2 leases, 3 inflight, 4 queue levels, 5 epoch,
--       6 the node's epoch (the epoch it last beat in, kept for the node ttl: an operator's
--       reset waits until every live node beats in its new epoch), 7 queue count, 8 beats (hash
--       node -> '<this beat ms> <its heartbeat interval ms> <its lease ms>', for operators' views)
-- ARGV: 1 node, 2 node ttl ms, 3 lease ms, 4 max leases to reclaim, 5 the frontier epoch the
--       node knows, 6 its heartbeat interval ms, 7.. lease ids held
-- Returns {extended, reclaimed, lost, epoch, queued, owners}: lost = the ids held by the node
-- that are no longer its (reclaimed by another node, or finished meanwhile); epoch is the
-- frontier's epoch now; queued the queue's length after the beat (a node weighs its lease calls
-- by it); owners the nodes the reclaimed leases were of, {node, count, ...}. When the epoch is
-- not the node's (Redis lost its data, or is another server), nothing else is done: the node
-- must re-enqueue what it holds first.
local epoch = redis.call('GET', KEYS[5]) or ''
if epoch ~= ARGV[5] then
  return {0, 0, {}, epoch, queue_length(KEYS[7]), {}}
end
local now = now_ms()
local node = ARGV[1]
local prefix = node .. '\t'
-- A node whose own beat comes after its alive-until was kept from Redis (an outage, a freeze:
-- Redis's clock ran on), and so were the others: their leases look expired only for that
-- reason, and their next beats extend them. It reclaims nothing this time.
local was_alive_until = tonumber(redis.call('ZSCORE', KEYS[1], node))
local kept_away = was_alive_until ~= nil and was_alive_until < now
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), node)
redis.call('SET', KEYS[6], epoch, 'PX', tonumber(ARGV[2]))
redis.call('HSET', KEYS[8], node, now .. ' ' .. ARGV[6] .. ' ' .. ARGV[3])
-- Variadic commands, QUEUE_CHUNK ids at a time: a command called from a script costs more than
-- the entries it touches.
local extended = 0
local lost = {}
local deadline = tostring(now + tonumber(ARGV[3]))
for from = 7, #ARGV, QUEUE_CHUNK do
  local to = math.min(#ARGV, from + QUEUE_CHUNK - 1)
  local records = redis.call('HMGET', KEYS[3], unpack(ARGV, from, to))
  local deadlines = {}
  for n = 1, to - from + 1 do
    local record = records[n]
    if record and string.sub(record, 1, #prefix) == prefix then
      deadlines[#deadlines + 1], deadlines[#deadlines + 2] = deadline, ARGV[from + n - 1]
    else
      lost[#lost + 1] = ARGV[from + n - 1]
    end
  end
  if #deadlines > 0 then
    redis.call('ZADD', KEYS[2], 'XX', unpack(deadlines))
    extended = extended + #deadlines / 2
  end
end
local reclaimed, owners = 0, {}
if not kept_away then
  local _, of_nodes
  reclaimed, _, of_nodes = queue_reclaim(KEYS[2], KEYS[3], KEYS[4], KEYS[7], now, tonumber(ARGV[4]))
  for owner, count in pairs(of_nodes) do
    table.insert(owners, owner)
    table.insert(owners, count)
  end
end
-- Forget nodes silent for a day (their leases were reclaimed long ago).
local forgotten = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - 86400000)
in_chunks('ZREM', KEYS[1], forgotten, 1)
in_chunks('HDEL', KEYS[8], forgotten, 1)
return {extended, reclaimed, lost, epoch, queue_length(KEYS[7]), owners}
