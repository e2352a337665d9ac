-- Mark a crawl's start requests written (crawler.frontier.start_claim); kept until a purge.
-- KEYS: 1 the crawl's start hash. ARGV: 1 node id, 2 (optional) how many start requests start()
-- gave before it raised (a later run says so instead of running it again).
-- Returns 1, or 0 when this node no longer held the claim (it expired and another node took it).
if redis.call('HGET', KEYS[1], 'node') ~= ARGV[1] then
    return 0
end
local now = redis.call('TIME')
redis.call('HSET', KEYS[1], 'state', 'done', 'at', now[1])
if ARGV[2] then
    redis.call('HSET', KEYS[1], 'failed_after', ARGV[2])
end
redis.call('PERSIST', KEYS[1])
return 1
