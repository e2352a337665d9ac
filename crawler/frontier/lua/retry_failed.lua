-- Put a failed request back at the tail of its level of the queue (`crawler failed retry`), all
-- or nothing: the request queued, the failure record removed, and the retry counted in the
-- crawl's ledger (`retried`: the request finishes once more without being enqueued again, so
-- the ledger's `enqueued + retried == done + failed`). The dupefilter is not touched: the
-- request was recorded as seen when it was first enqueued, and goes back regardless.
-- lua/queue.lua comes before this body.
-- KEYS: 1 failed (hash id -> failure JSON), 2 queue levels, 3 queue count, 4 (optional) ledger
--       hash of the crawl (given when it shares the part's hash tag)
-- ARGV: 1 failed id, 2 the failure record as read (retried only if it is still that),
--       3 score (-priority, an integer's text), 4 request JSON
-- Returns 1, or 0 when the record is gone or changed since it was read.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
queue_push(KEYS[2], KEYS[3], {ARGV[3]}, {ARGV[4]}, false)
redis.call('HDEL', KEYS[1], ARGV[1])
if KEYS[4] then
  redis.call('HINCRBY', KEYS[4], 'retried', 1)
end
return 1
