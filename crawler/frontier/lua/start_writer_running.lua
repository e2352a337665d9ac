-- The node that wrote a crawl's start requests, when its heartbeat is current by the clock of
-- the server that holds the records (crawler.frontier.start_claim.running_writer).
-- KEYS: 1 the crawl's start hash, 2 the spider's nodes sorted set (node id -> alive until, ms);
-- both under the spider's hash tag. Returns the node id, or '' (no writer recorded, or not live).
local writer = redis.call('HGET', KEYS[1], 'node')
if not writer then
  return ''
end
local alive_until = redis.call('ZSCORE', KEYS[2], writer)
local now = redis.call('TIME')
if alive_until and tonumber(alive_until) >= now[1] * 1000 + math.floor(now[2] / 1000) then
  return writer
end
return ''
