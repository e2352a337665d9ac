-- Claim the writing of a plain spider's start requests for one crawl (crawler.frontier.start_claim).
-- KEYS: 1 the crawl's start hash ({<spider>}:start:<crawl id>)
-- ARGV: 1 node id, 2 claim lifetime (ms), 3 the spider arguments the node was given (text, kept
--       with a claim won; '' when not known), 4 what the node's start_urls are (their count and
--       a digest, kept with a claim won; '' for none)
-- Returns 'done' (written by some node already), 'held' (another live node is writing them),
-- or 'won' (this node writes them now and must refresh the claim until it marks them done).
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'done' then
    return 'done'
end
local holder = redis.call('HGET', KEYS[1], 'node')
if state == 'writing' and holder ~= ARGV[1] and redis.call('PTTL', KEYS[1]) > 0 then
    return 'held'
end
local now = redis.call('TIME')
redis.call('HSET', KEYS[1], 'state', 'writing', 'node', ARGV[1], 'since', now[1])
if ARGV[3] and ARGV[3] ~= '' then
    redis.call('HSET', KEYS[1], 'arguments', ARGV[3])
else
    redis.call('HDEL', KEYS[1], 'arguments')
end
if ARGV[4] and ARGV[4] ~= '' then
    redis.call('HSET', KEYS[1], 'start_urls', ARGV[4])
else
    redis.call('HDEL', KEYS[1], 'start_urls')
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 'won'
