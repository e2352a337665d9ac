-- Which fingerprints the frontier's dedup has recorded, recording none (read-only).
-- crawler.frontier.dedup puts the dedup snippet of FRONTIER_DUPEFILTER (lua/dedup_*.lua) before
-- this body: it defines DEDUP_ARGC, dedup_peek_open() and dedup_has(fingerprint).
-- KEYS and ARGV as turn.lua takes them (ARGV 1..4 unused), then the fingerprints.
-- Returns one 0/1 per fingerprint (1: seen).
local first = 5 + DEDUP_ARGC
local seen = {}
dedup_peek_open()
for i = first, #ARGV do
  seen[#seen + 1] = dedup_has(ARGV[i]) and 1 or 0
end
return seen
