-- Return the seeds held by nodes whose hold expired (or by one node, at its graceful stop) to
-- the seed key, where they are taken again first (crawler.frontier.seed_queue).
-- KEYS: 1 seed key, 2 takers hash (node -> hold deadline, ms), 3 let-go hash (node -> the id
--       of its last let-go: forgotten with its list)
-- ARGV: 1 prefix of the taken lists (node id appended), 2 seed key type: list | set | zset,
--       3 a node whose seeds to return now ('' = every node whose hold expired)
-- Returns the number of seeds returned.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local holders = {}
if ARGV[3] ~= '' then
    holders[1] = ARGV[3]
else
    local takers = redis.call('HGETALL', KEYS[2])
    for i = 1, #takers, 2 do
        if tonumber(takers[i + 1]) <= now_ms then
            holders[#holders + 1] = takers[i]
        end
    end
end
local returned = 0
for _, node in ipairs(holders) do
    local list = ARGV[1] .. node
    local seeds = redis.call('LRANGE', list, 0, -1)
    for i = #seeds, 1, -1 do  -- the first taken goes back last: it is taken again first
        local seed = seeds[i]
        if ARGV[2] == 'list' then
            redis.call('RPUSH', KEYS[1], seed)
        elseif ARGV[2] == 'set' then
            redis.call('SADD', KEYS[1], seed)
        else
            local space = string.find(seed, ' ', 1, true)
            local scored = space and redis.pcall(
                'ZADD', KEYS[1], string.sub(seed, 1, space - 1), string.sub(seed, space + 1))
            if not scored or type(scored) == 'table' and scored.err then
                -- taken from a list or set (the seed key's type changed since): score 0
                redis.call('ZADD', KEYS[1], 0, seed)
            end
        end
    end
    returned = returned + #seeds
    redis.call('HDEL', KEYS[3], node)
    if #seeds > 0 then
        -- Keep the holder, expired: a seed still on its way into the list (a blocking move
        -- that was waiting) goes back at the next look, which forgets the holder.
        redis.call('DEL', list)
        redis.call('HSET', KEYS[2], node, 0)
    else
        redis.call('HDEL', KEYS[2], node)
    end
end
return returned
