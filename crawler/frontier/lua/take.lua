-- The lease step lease.lua and spill_take.lua share (crawler.frontier.client.leasing_script puts
-- it before them). KEYS: 1 queue, 2 data, 3 leases (zset id -> deadline ms), 4 inflight (hash
-- id -> "<node>\t<queue score>").
-- Lease the requests `ids` (taken out of the queue; `scores`: their queue scores) to `node` until
-- `deadline`: one HMGET, ZADD and HSET (a command called from a script costs more than the
-- entries it touches). Appends id, [score,] body of each to `out`; returns the ids leased (a
-- request without data, deleted by hand, is dropped).
local function take(ids, scores, node, deadline, out, with_scores)
  local bodies = redis.call('HMGET', KEYS[2], unpack(ids))
  local deadlines, records, leased = {}, {}, {}
  for n, id in ipairs(ids) do
    local body = bodies[n]
    if body then
      deadlines[#deadlines + 1], deadlines[#deadlines + 2] = deadline, id
      records[#records + 1], records[#records + 2] = id, node .. '\t' .. scores[n]
      leased[#leased + 1] = id
      out[#out + 1] = id
      if with_scores then
        out[#out + 1] = scores[n]
      end
      out[#out + 1] = body
    end
  end
  if #leased > 0 then
    redis.call('ZADD', KEYS[3], unpack(deadlines))
    redis.call('HSET', KEYS[4], unpack(records))
  end
  return leased
end
