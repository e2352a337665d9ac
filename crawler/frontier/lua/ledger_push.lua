-- Add one node run's stat deltas to the crawl ledger, once (crawler.extensions.ledger).
-- A push is numbered per run; a push that timed out on the client but ran here is sent again
-- with the same number and is not added twice. The run's last push (number, Redis time, whether
-- it was the final one at a graceful stop) is kept so `crawler status` can tell which runs
-- stopped without their final push (their last deltas are missing).
-- KEYS: 1 the crawl's totals hash, 2 the crawl's runs hash
-- ARGV: 1 run id, 2 push number (1, 2, ...), 3 minute-bucket key prefix, 4 bucket TTL (s),
--       5 'final' | 'running', 6 the run's push interval (ms), then field, delta pairs
-- Returns 1 when added, 0 when this push was added before.
local run = ARGV[1]
local number = tonumber(ARGV[2])
local last = tonumber(redis.call('HGET', KEYS[2], run .. ':push') or '0')
if number <= last then
    return 0
end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('HSET', KEYS[2], run .. ':push', number, run .. ':at', now_ms, run .. ':state', ARGV[5],
    run .. ':every', ARGV[6])
redis.call('HSETNX', KEYS[1], 'started_ms', now_ms)
if #ARGV > 6 then
    local minute = ARGV[3] .. math.floor(now_ms / 60000)
    for i = 7, #ARGV, 2 do
        redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
        redis.call('HINCRBY', minute, ARGV[i], ARGV[i + 1])
    end
    redis.call('EXPIRE', minute, tonumber(ARGV[4]))
end
return 1
