-- Extend this node's claim on writing a crawl's start requests (crawler.frontier.start_claim).
-- KEYS: 1 the crawl's start hash. ARGV: 1 node id, 2 claim lifetime (ms).
-- Returns 1 while the claim is this node's, else 0.
if redis.call('HGET', KEYS[1], 'node') ~= ARGV[1] or redis.call('HGET', KEYS[1], 'state') ~= 'writing' then
    return 0
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
