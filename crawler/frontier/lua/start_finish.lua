-- Mark a crawl's start requests written (crawler.frontier.start_claim); kept until a purge.
-- KEYS: 1 the crawl's start hash. ARGV: 1 node id, 2 how many start requests start() gave
-- before it raised ('' or none: it did not; a later run says so instead of running it again),
-- 3 what start() set up on its spider ('': nothing; the other nodes say it; none: a node of
-- an earlier version, which did not record it).
-- Returns 1, or 0 when this node no longer held the claim (it expired and another node took it).
if redis.call('HGET', KEYS[1], 'node') ~= ARGV[1] then
    return 0
end
local now = redis.call('TIME')
redis.call('HSET', KEYS[1], 'state', 'done', 'at', now[1])
if ARGV[2] and ARGV[2] ~= '' then
    redis.call('HSET', KEYS[1], 'failed_after', ARGV[2])
end
if ARGV[3] then  -- also '': a node of an earlier version records no field at all
    redis.call('HSET', KEYS[1], 'set_up', ARGV[3])
end
redis.call('PERSIST', KEYS[1])
return 1
