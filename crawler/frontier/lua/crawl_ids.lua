-- Record a node's CRAWLER_CRAWL_ID and read those of the other running nodes of its spider, in
-- one step (crawler.frontier.crawl_ids).
-- KEYS: 1 node -> crawl id (hash, part 0's tag)
-- ARGV: 1 node, 2 its crawl id, 3 prefix of the run keys ({<spider>}:run:, node id appended)
-- Returns {node, crawl id, ...} of the other nodes that run.
return record_among_running(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
