-- Give up this node's claim on writing a crawl's start requests (crawler.frontier.start_claim):
-- the node stops before it finished, so another node may take the claim at once.
-- KEYS: 1 the crawl's start hash. ARGV: 1 node id.
-- Returns 1, or 0 when the claim was not this node's (or the start requests are written).
if redis.call('HGET', KEYS[1], 'node') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'state') ~= 'writing' then
    return 0
end
redis.call('DEL', KEYS[1])
return 1
