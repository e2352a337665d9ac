-- Forget a session: its hash and its place in the LRU index.
-- KEYS: 1 session hash, 2 accounts. ARGV: 1 account. Returns 1 when a session was deleted.
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
