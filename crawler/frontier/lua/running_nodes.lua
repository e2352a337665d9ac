-- The nodes of a spider whose heartbeat is current, by the clock of the server that holds the
-- record (crawler.frontier.pending.running_nodes).
-- KEYS: 1 a part's nodes sorted set (node id -> alive until, ms). Returns their ids.
local now = redis.call('TIME')
return redis.call('ZRANGEBYSCORE', KEYS[1], now[1] * 1000 + math.floor(now[2] / 1000), '+inf')
