-- The lease step turn.lua and spill_take.lua share (after lua/queue.lua).
-- Lease `bodies` (taken off the queue; `scores`: their levels) to `node` until `deadline` (ms,
-- text): ids from `seq` (12 hex digits, one INCRBY), one ZADD on `leases` (id -> deadline) and
-- one HSET on `inflight` (id -> '<node>\t<score>\t<JSON>') per QUEUE_CHUNK. Appends id, [score,]
-- JSON of each to `out`; returns the ids.
local function lease_bodies(seq, leases, inflight, bodies, scores, node, deadline, out, with_scores)
  local ids = {}
  local n = #bodies
  if n == 0 then
    return ids
  end
  local first = redis.call('INCRBY', seq, n) - n
  for from = 1, n, QUEUE_CHUNK do
    local deadlines, records = {}, {}
    for i = from, math.min(n, from + QUEUE_CHUNK - 1) do
      local id = string.format('%012x', first + i)
      ids[i] = id
      deadlines[#deadlines + 1], deadlines[#deadlines + 2] = deadline, id
      records[#records + 1], records[#records + 2] = id, node .. '\t' .. scores[i] .. '\t' .. bodies[i]
      out[#out + 1] = id
      if with_scores then
        out[#out + 1] = scores[i]
      end
      out[#out + 1] = bodies[i]
    end
    redis.call('ZADD', leases, unpack(deadlines))
    redis.call('HSET', inflight, unpack(records))
  end
  return ids
end
