-- Release a login lease, only by its owner (compare and delete). KEYS: 1 lease. ARGV: 1 token.
-- Returns 1 when released, 0 when it had expired or another node holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
