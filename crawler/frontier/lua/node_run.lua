-- One process per node id (crawler.frontier.node_run): the run of a node id holds
-- KEYS[1] ({<spider>}:run:<node>) while it beats; another run of the same id waits for it to
-- expire (a killed run) or is refused (a live one: it refreshes the key).
-- ARGV: 1 this run's token, 2 time to live (ms), 3 'claim' | 'beat' | 'end'
-- Returns {'ours'} (held, refreshed: '<run> <Redis ms>'), {'held', value, ms it lives on}
-- (another run's), or {'ended'}.
local held = redis.call('GET', KEYS[1])
local mine = held and string.sub(held, 1, #ARGV[1] + 1) == ARGV[1] .. ' '
if ARGV[3] == 'end' then
  if mine then
    redis.call('DEL', KEYS[1])
  end
  return {'ended'}
end
if held and not mine then
  return {'held', held, redis.call('PTTL', KEYS[1])}
end
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ms, 'PX', tonumber(ARGV[2]))
return {'ours'}
