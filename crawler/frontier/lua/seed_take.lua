-- Take up to a batch of seeds for one node (crawler.frontier.seed_queue): they move from the
-- seed key into the node's taken list in this one step, and leave that list only once their
-- requests are in the frontier, so a node that dies never loses one (seed_reclaim returns them).
-- KEYS: 1 seed key, 2 this node's taken list, 3 takers hash (node -> hold deadline, ms),
--       4 let-go hash (node -> the id of its last let-go)
-- ARGV: 1 batch size (0: only refresh the hold), 2 node id, 3 hold lifetime (ms),
--       4 seed key type: list | set | zset, 5 seeds of the held batch now in the frontier (they
--       leave the taken list first), 6 the id of that let-go: a call sent again (its reply
--       lost) lets them go once, and does not trim the batch taken after them
-- Returns the node's taken list (seeds it took before and still holds first); a zset entry is
-- '<score> <member>'. A seed key of another type is a WRONGTYPE error.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('HSET', KEYS[3], ARGV[2], now_ms + tonumber(ARGV[3]))
local done = tonumber(ARGV[5] or '0')
if done > 0 and redis.call('HGET', KEYS[4], ARGV[2]) ~= ARGV[6] then
    redis.call('LTRIM', KEYS[2], done, -1)
    redis.call('HSET', KEYS[4], ARGV[2], ARGV[6])
end
local count = tonumber(ARGV[1])
if count == 0 then
    return {}
end
local held = redis.call('LRANGE', KEYS[2], 0, -1)
local want = count - #held
if want <= 0 then
    return held
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
    return held
end
if kind ~= ARGV[4] then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local taken = {}
if kind == 'list' then
    taken = redis.call('RPOP', KEYS[1], want) or {}
elseif kind == 'set' then
    taken = redis.call('SPOP', KEYS[1], want)
else
    local pairs = redis.call('ZPOPMAX', KEYS[1], want)
    for i = 1, #pairs, 2 do
        taken[#taken + 1] = pairs[i + 1] .. ' ' .. pairs[i]
    end
end
if #taken > 0 then
    redis.call('RPUSH', KEYS[2], unpack(taken))
    for _, seed in ipairs(taken) do
        held[#held + 1] = seed
    end
end
return held
