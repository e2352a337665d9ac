-- Dedup snippet, mode exact: a set of hex fingerprints (what scrapy-redis keeps).
-- KEYS[7]: set. No arguments.
-- Defines dedup_open/add/close (complete.lua) and dedup_peek_open/has (seen.lua: read-only).
local DEDUP_ARGC = 0
local function dedup_open() end
local function dedup_add(fingerprint)
  return redis.call('SADD', KEYS[7], fingerprint) == 1
end
local function dedup_close() end
local dedup_peek_open = dedup_open
local function dedup_has(fingerprint)
  return redis.call('SISMEMBER', KEYS[7], fingerprint) == 1
end
