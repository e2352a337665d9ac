"""Where the frontier's write script (``lua/turn.lua``) spends its time, section by section.

A probe (Redis ``TIME``, about 0.5 us each) goes before each line of ``SECTIONS``; each one
adds the microseconds since the one before to a hash, under the name of the section it ends.
``bench.redis_profile`` runs the load generator's writes with the probed script on a fresh
server and prints each section's share of the script's own time (``commandstats``).
"""

from __future__ import annotations

import redis

from crawler.lua import text

# (the line of lua/turn.lua a probe goes before, the section that line ends: the commands in it)
SECTIONS = (
    ("local node = ARGV[2]", ""),  # the first probe: sections are timed from here
    ("local function lease_share(", "finish the leases (HMGET, ZREM, HDEL)"),
    ("  dedup_close()", "dedup the links (SMISMEMBER, SADD)"),
    ("local leased = {}", "queue the new ones (RPUSH, ZADD, INCRBY)"),
    ("    local bodies, scores = {}, {}", "the node's share (GET, EXISTS, GET)"),
    ("    local ids = lease_bodies(", "take off the queue (ZRANGE, LPOP, DECRBY)"),
    ("local feedback = ", "lease them (INCRBY, ZADD, HSET, SET)"),
    ("return {statuses", "the dedup feedback (none in mode exact)"),
)
SPENT = "probe:turn-sections"  # hash: section -> microseconds, and 'calls'

PROBE = """local probe_spent, probe_last = {}, nil
local function probe(section)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if probe_last then
    probe_spent[#probe_spent + 1], probe_spent[#probe_spent + 2] = section, now - probe_last
  end
  probe_last = now
end"""
FLUSH = f"""for i = 1, #probe_spent, 2 do
  redis.call('HINCRBY', '{SPENT}', probe_spent[i], probe_spent[i + 1])
end
redis.call('HINCRBY', '{SPENT}', 'calls', 1)"""


def probed(script: str) -> str:
    """The turn script ``script`` with a probe before each line of ``SECTIONS``; refuses a
    script that lacks one of them (``lua/turn.lua`` changed: move the probes with it)."""
    out, found = [], set()
    for line in script.split("\n"):
        for anchor, section in SECTIONS:
            if line.startswith(anchor) and anchor not in found:
                found.add(anchor)
                out += [PROBE] if not section else []
                out.append(f"probe({section!r})")  # a Python literal Lua reads alike
                out += [FLUSH] if anchor == SECTIONS[-1][0] else []
        out.append(line)
    if missing := [anchor for anchor, _ in SECTIONS if anchor not in found]:
        raise ValueError(f"lines not in the turn script (lua/turn.lua changed?): {missing}")
    return "\n".join(out)


def report(client: redis.Redis) -> list[str]:
    """Each section's time per write and share of the script's, from ``SPENT`` and the
    server's ``commandstats`` (reset before the probed writes)."""
    spent = {text(key): int(value) for key, value in client.hgetall(SPENT).items()}
    calls = spent.pop("calls")
    script = float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])
    lines = [f"the write script, probed: {script:.0f} us a write of 8 pages"]
    for _, section in SECTIONS[1:]:
        each = spent.get(section, 0) / calls
        lines.append(f"{each:5.1f} us {each / script:4.0%}  {section}")
    rest = script - sum(spent.values()) / calls
    rest_name = "the rest (its arguments into Lua, the probes)"
    lines.append(f"{rest:5.1f} us {rest / script:4.0%}  {rest_name}")
    return lines
