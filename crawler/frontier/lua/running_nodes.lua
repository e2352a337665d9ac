-- A node's record in a hash of node -> value, read beside the records of the other nodes that
-- run (their run key, the prefix given with the node id appended, held: crawler.frontier.node_run;
-- the prefix carries the hash's tag, so the keys share its slot). Records of nodes that do not
-- run are dropped. Used by crawl_ids.lua and item_topics.lua.
local function record_among_running(hash, node, value, run_prefix)
  redis.call('HSET', hash, node, value)
  local running, recorded = {}, redis.call('HGETALL', hash)
  for i = 1, #recorded, 2 do
    local other = recorded[i]
    if other ~= node then
      if redis.call('EXISTS', run_prefix .. other) == 0 then
        redis.call('HDEL', hash, other)
      else
        running[#running + 1] = other
        running[#running + 1] = recorded[i + 1]
      end
    end
  end
  return running
end
