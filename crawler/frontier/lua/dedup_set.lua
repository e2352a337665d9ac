-- Dedup snippet, mode exact: a set of fingerprints, each its first 12 bytes (binary).
-- KEYS[7]: set. No arguments.
-- Defines dedup_open/add_many/close (turn.lua) and dedup_peek_open/has (seen.lua: read-only).
local DEDUP_ARGC = 0
local function dedup_open() end
-- One SMISMEMBER and one SADD per 1000 fingerprints, not a SADD each; a fingerprint twice in
-- the list is new the first time only.
local function dedup_add_many(fingerprints)
  local new, added = {}, {}
  for from = 1, #fingerprints, 1000 do
    local to = math.min(#fingerprints, from + 999)
    local members = {}
    for n = from, to do
      if fingerprints[n] ~= '' then
        members[#members + 1] = fingerprints[n]
      end
    end
    local known = #members > 0 and redis.call('SMISMEMBER', KEYS[7], unpack(members)) or {}
    local fresh, m = {}, 0
    for n = from, to do
      local fingerprint = fingerprints[n]
      if fingerprint == '' then
        new[n] = true
      else
        m = m + 1
        new[n] = known[m] == 0 and not added[fingerprint]
        if new[n] then
          added[fingerprint] = true
          fresh[#fresh + 1] = fingerprint
        end
      end
    end
    if #fresh > 0 then
      redis.call('SADD', KEYS[7], unpack(fresh))
    end
  end
  return new
end
local function dedup_close() end
local dedup_peek_open = dedup_open
local function dedup_has(fingerprint)
  return redis.call('SISMEMBER', KEYS[7], fingerprint) == 1
end
local function dedup_feedback()
  return ''  -- nothing for the node
end
