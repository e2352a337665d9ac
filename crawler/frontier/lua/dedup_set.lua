-- Dedup snippet, mode exact: a set of hex fingerprints (what scrapy-redis keeps).
-- KEYS[7]: set. No arguments.
local DEDUP_ARGC = 0
local function dedup_open() end
local function dedup_add(fingerprint)
  return redis.call('SADD', KEYS[7], fingerprint) == 1
end
local function dedup_close() end
