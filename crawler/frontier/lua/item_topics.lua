-- Record a node's KAFKA_TOPIC_TEMPLATE and check it against its crawl's, in one step
-- (crawler.frontier.item_topics): nodes that start together see each other's records.
-- KEYS: 1 the crawl's template (string), 2 node -> template (hash); both in part 0's tag
-- ARGV: 1 node, 2 its template, 3 prefix of the run keys ({<spider>}:run:, node id appended)
-- Returns {'recorded'} (the crawl's first), {'same'}, {'refused', template, node, ...} (running
-- nodes send to the crawl's template) or {'taken', template} (none does: this node's is the
-- crawl's now). Records of nodes that do not run are dropped.
local running = record_among_running(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
local recorded = redis.call('GET', KEYS[1])
if not recorded then
    redis.call('SET', KEYS[1], ARGV[2])
    return {'recorded'}
end
if recorded == ARGV[2] then
    return {'same'}
end
local senders = {}
for i = 1, #running, 2 do
    if running[i + 1] == recorded then
        senders[#senders + 1] = running[i]
    end
end
if #senders > 0 then
    return {'refused', recorded, unpack(senders)}
end
redis.call('SET', KEYS[1], ARGV[2])
return {'taken', recorded}
