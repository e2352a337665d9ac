-- Leases a node id holds that its new run does not (crawler.frontier.node_run): its previous
-- run was killed, as its expired run key shows. Each such lease expires now, so the next
-- heartbeat's reclaim returns it to the head of its level, as it returns a dead node's.
-- KEYS: 1 leases (zset id -> deadline ms), 2 inflight (hash id -> '<node>\t<score>\t<body>')
-- ARGV: 1 the node id
-- Returns how many leases expire now.
local prefix = ARGV[1] .. '\t'
local records = redis.call('HGETALL', KEYS[2])
local expired = 0
for i = 1, #records, 2 do
  if string.sub(records[i + 1], 1, #prefix) == prefix then
    expired = expired + redis.call('ZADD', KEYS[1], 'XX', 'CH', 0, records[i])
  end
end
return expired
