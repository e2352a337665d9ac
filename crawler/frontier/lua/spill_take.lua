-- Lease the lowest-priority requests a part holds beyond its bound to node ARGV[1], to be
-- spilled to Kafka (crawler.frontier.backlog): a lease like any other, so a node that dies
-- while spilling only returns them to the queue when the lease expires. lua/queue.lua and
-- lua/lease.lua come before this body.
-- KEYS: 1 queue levels, 2 queue count, 3 seq, 4 leases, 5 inflight
-- ARGV: 1 node, 2 requests to keep queued (FRONTIER_QUEUE_MAX), 3 most to take, 4 lease ms
-- Returns a flat list id1, score1, json1, ...: the tail of the queue, in queue order.
local excess = queue_length(KEYS[2]) - tonumber(ARGV[2])
if excess <= 0 then
  return {}
end
local tail, scores_tail = {}, {}
queue_take(KEYS[1], KEYS[2], math.min(excess, tonumber(ARGV[3])), tail, scores_tail, true)
local bodies, scores, out = {}, {}, {}
for i = #tail, 1, -1 do  -- taken from the tail backwards
  bodies[#bodies + 1], scores[#scores + 1] = tail[i], scores_tail[i]
end
lease_bodies(KEYS[3], KEYS[4], KEYS[5], bodies, scores, ARGV[1], deadline_after(ARGV[4]), out, true)
return out
