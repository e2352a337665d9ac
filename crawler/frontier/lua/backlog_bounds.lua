-- A node's FRONTIER_QUEUE_MAX recorded beside those of the crawl's other nodes (each should
-- keep the same: crawler.frontier.backlog_bounds), atomically; the record of a node gone from
-- the nodes sorted set (silent for a day) is dropped.
-- KEYS: 1 bounds (hash node -> bound), 2 the spider's nodes (zset node -> alive until, ms); both
--       in part 0
-- ARGV: 1 node, 2 its bound
-- Returns {node, bound, ...} of the other nodes alive now (by this server's clock).
local now = redis.call('TIME')
local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local recorded, live = redis.call('HGETALL', KEYS[1]), {}
for n = 1, #recorded, 2 do
  local node = recorded[n]
  if node ~= ARGV[1] then
    local alive_until = redis.call('ZSCORE', KEYS[2], node)
    if not alive_until then
      redis.call('HDEL', KEYS[1], node)
    elseif tonumber(alive_until) >= now_ms then
      live[#live + 1] = node
      live[#live + 1] = recorded[n + 1]
    end
  end
end
return live
