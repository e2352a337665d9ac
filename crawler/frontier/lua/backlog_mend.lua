-- A partition of the backlog topic ends before the offset recorded as written to it: Kafka
-- acknowledged those messages, so the topic was made again (deleted by hand) and they are
-- gone. The part's offsets start over in the topic as it is (its messages, from 0, wait to be
-- read back) and the count with them; what waited in the topic that was is lost.
-- lua/backlog_count.lua comes before this body.
-- KEYS: 1 backlog (count), 2 backlog read, 3 backlog written (hashes topic -> offset)
-- ARGV: 1 topic, 2 the next offset written as read before the high watermark was asked for,
--       3 the partition's high watermark
-- Returns the requests lost (0 when a node wrote meanwhile: the look is made again later).
local topic, written = ARGV[1], tonumber(ARGV[2])
if backlog_offset(KEYS[3], topic) ~= written then
  return 0
end
return backlog_start_over(KEYS[1], KEYS[2], KEYS[3], topic, ARGV[3])
