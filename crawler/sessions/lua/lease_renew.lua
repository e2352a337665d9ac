-- Extend a login lease, only by its owner. KEYS: 1 lease. ARGV: 1 token, 2 ms.
-- Returns 1 when extended, 0 when the lease is gone or another node holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
