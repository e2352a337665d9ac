-- Kafka acknowledged these spilled requests: drop their leases (with their requests) from Redis
-- and move the part's next offset written past the highest one Kafka gave them, which counts
-- them in the part's backlog (which crawler status and the idle check add to the queue),
-- atomically. A lease the node no longer holds (it expired and another node reclaimed it: its
-- request is queued again, or crawled) is left alone, and its message's key is recorded in the
-- unsure hash, so that the message, read back, is skipped (lua/spill_back.lua): each request is
-- crawled once. Not when the part's epoch is no longer the spill's: Redis lost its data, the
-- leases with it, and the message is the request's only copy.
-- The leases it drops are recorded in the spill's fence: a call again for the same spill (its
-- answer lost to a connection error, or Redis away as the spill settled, and the call made
-- at the next step) finds those an earlier call dropped, and tells them from leases another
-- node reclaimed.
-- lua/backlog_count.lua comes before this body.
-- KEYS: 1 leases, 2 inflight, 3 backlog (count), 4 backlog read, 5 backlog written (hashes
--       topic -> offset), 6 unsure (hash message key -> 1), 7 epoch, 8 the spill's fence (set
--       of lease ids)
-- ARGV: 1 node, 2 topic, 3 the highest offset Kafka gave the spill + 1, 4 the spill's prefix of
--       its messages' keys ('<spill id>:'), 5 the part's epoch when the spill began, 6 how
--       long the fence is kept (ms), 7.. lease ids (the node's, from spill_take.lua)
-- Returns {dropped (by this call or an earlier one of the spill), the lease ids recorded as
-- reclaimed...} (a call again names them again: the node counts each once).
local prefix, dropped, lost, seen, earlier = ARGV[1] .. '\t', {}, {}, {}, 0
local reclaimed = {0}
local record = redis.call('GET', KEYS[7]) == ARGV[5]
for from = 7, #ARGV, 1000 do
  local ids = {unpack(ARGV, from, math.min(#ARGV, from + 999))}
  local records = redis.call('HMGET', KEYS[2], unpack(ids))
  for n, id in ipairs(ids) do
    if not seen[id] then
      seen[id] = true
      if records[n] and string.sub(records[n], 1, #prefix) == prefix then
        dropped[#dropped + 1] = id
      elseif redis.call('SISMEMBER', KEYS[8], id) == 1 then
        -- dropped by an earlier call of this spill, whose answer was lost: counted now
        earlier = earlier + 1
      elseif record then
        lost[#lost + 1] = ARGV[4] .. id
        lost[#lost + 1] = 1
        reclaimed[#reclaimed + 1] = id
      end
    end
  end
end
for from = 1, #dropped, 1000 do
  local ids = {unpack(dropped, from, math.min(#dropped, from + 999))}
  redis.call('ZREM', KEYS[1], unpack(ids))
  redis.call('HDEL', KEYS[2], unpack(ids))
  redis.call('SADD', KEYS[8], unpack(ids))
end
if #dropped > 0 then
  redis.call('PEXPIRE', KEYS[8], ARGV[6])
end
for from = 1, #lost, 1000 do
  redis.call('HSET', KEYS[6], unpack(lost, from, math.min(#lost, from + 999)))
end
if tonumber(ARGV[3]) > backlog_offset(KEYS[5], ARGV[2]) then
  redis.call('HSET', KEYS[5], ARGV[2], ARGV[3])
end
backlog_recount(KEYS[3], KEYS[4], KEYS[5])
reclaimed[1] = #dropped + earlier
return reclaimed
