-- Record what a response said about an account.
-- KEYS: 1 session hash
-- ARGV: 1 health (healthy | expired | risky | banned | retired), 2 reason, 3 cooldown ms,
--       4 now ms ('' = server time), 5 strikes before retirement,
--       6 generation the caller used ('' = any; another one means a newer login already
--       replaced those cookies, and the mark is dropped), 7 '0': no strike (a rest the site
--       asked for with Retry-After)
-- risky and banned count a strike (unless ARGV[7] is '0') and rest the account for the
-- cooldown; the strike that reaches ARGV[5] retires it. One event is one strike: a mark while
-- the account still rests (requests sent before the first answer came back) counts none and
-- keeps the longer rest. A retired account stays retired (only put replaces it);
-- healthy clears the cooldown, expired keeps one still running (and the login after it too).
-- Returns the health after the call, or false when there is no such session.
local s = redis.call('HMGET', KEYS[1], 'health', 'strikes', 'generation', 'cooldown_until')
if not s[1] then return false end
if s[1] == 'retired' or (ARGV[6] ~= '' and s[3] ~= ARGV[6]) then return s[1] end
local now
if ARGV[4] ~= '' then now = tonumber(ARGV[4]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local health = ARGV[1]
local strikes = tonumber(s[2]) or 0
local cooldown = 0
local resting_until = tonumber(s[4]) or 0
if health == 'expired' and resting_until > now then
  cooldown = resting_until  -- a rest the site asked for outlives the login it now wants
elseif health == 'risky' or health == 'banned' then
  if ARGV[7] ~= '0' and resting_until <= now then strikes = strikes + 1 end
  cooldown = math.max(resting_until, now + tonumber(ARGV[3]))
  if strikes >= tonumber(ARGV[5]) then health = 'retired' end
end
redis.call('HSET', KEYS[1], 'health', health, 'reason', ARGV[2], 'strikes', strikes,
  'cooldown_until', cooldown)
return health
