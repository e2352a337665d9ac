"""Where Redis spends its CPU on the load generator's writes, and what a set lookup costs here.

    .venv/bin/python -m bench.redis_profile [--writes 1500] [--no-perf]

One node writes ``--writes`` times the 8 pages of a lease batch (``bench.load_workload``: 20
links a page, 16 seen before), exact dedup, each write leasing the next 8, on a fresh
``redis-server``; under ``perf record`` of that server when ``perf`` is installed (the share of
its samples in the kernel and its top functions). Then the floor of those writes: as many
round trips, each sending and receiving as many bytes, to a script that only returns its
argument (what the socket and the command dispatch cost whatever the frontier does), and the
same calls two to a round trip (what folding the link check into the write before would save).
Then the cost of ``SMISMEMBER`` of 160 12-byte members, present and absent, on a 20,000-member
set (Redis's own ``commandstats``): the link check's lookup, which the machine's memory
latency, not our code, decides. Then what Lua's steps cost here, each alone (a call from Lua, a
string made in Lua, an argument, a field read back from a hash): every section of the write is
made of them. Last, the same writes on a fresh server through the write script with a probe
before each of its sections (``bench.turn_sections``): each one's share of the script's time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis

from bench import turn_sections
from bench.frontier_load import KEYS, fresh_redis, new_request
from bench.load_workload import LEASE_BATCH, UrlSpace, link_request
from bench.probe import RoundTrips
from bench.readings import redis_cpu
from crawler.frontier.client import Finish, FrontierClient, LeaseAsk, NewRequest
from crawler.redis_connection import async_client
from crawler.redis_url import RedisConfig

SET_SIZE, LOOKUPS = 20_000, 160
SET_LOOKUP = re.compile(r"dictFind|dictSdsKeyCompare|dictSdsHash")
ECHO = "return ARGV[1]"  # the floor's script: no key, no work, a reply of the size given


@dataclass(frozen=True)
class Traffic:
    """What one run of writes cost Redis."""

    cpu: float  # seconds of its main thread
    round_trips: int
    bytes_in: int
    bytes_out: int

    def per_page(self, pages: int) -> str:
        return (
            f"{self.cpu / pages * 1e6:.0f} us of Redis CPU per page "
            f"({self.round_trips / pages:.2f} round trips, {self.bytes_in / pages:.0f} B in, "
            f"{self.bytes_out / pages:.0f} B out)"
        )


def measured(client: redis.Redis, run: Callable[[], None]) -> Traffic:
    RoundTrips.install()
    stats, cpu, trips = client.info("stats"), redis_cpu(client), RoundTrips.count
    run()
    after = client.info("stats")
    return Traffic(
        redis_cpu(client) - cpu,
        RoundTrips.count - trips,
        int(after["total_net_input_bytes"]) - int(stats["total_net_input_bytes"]),
        int(after["total_net_output_bytes"]) - int(stats["total_net_output_bytes"]),
    )


async def echo_calls(url: str, like: Traffic, per_trip: int = 1) -> None:
    """``like.round_trips`` calls of ``ECHO``, sending and receiving as many bytes in all,
    ``per_trip`` of them in each round trip (a pipeline)."""
    client = async_client(RedisConfig.from_url(url))
    calls = like.round_trips
    reply = b"r" * (like.bytes_out // calls)
    padding = b"p" * max(0, like.bytes_in // calls - len(reply) - 60)  # 60: EVAL's own framing
    for start in range(0, calls, per_trip):
        pipe = client.pipeline(transaction=False)
        for _ in range(min(per_trip, calls - start)):
            pipe.eval(ECHO, 0, reply, padding)
        await pipe.execute()
    await client.aclose()


async def write_batches(url: str, plans: list[list[NewRequest]], *, probe: bool = False) -> None:
    # probe: the same writes through the script with section probes (bench.turn_sections)
    client = FrontierClient(
        async_client(RedisConfig.from_url(url)),
        KEYS,
        "node-0",
        turn_text=turn_sections.probed if probe else None,
    )
    held = await client.lease(LEASE_BATCH, 60_000)
    for children in plans:
        finishes = [Finish(lease.id, "done") for lease in held]
        write = await client.complete_many(
            finishes, children, lease=LeaseAsk(LEASE_BATCH, 60_000, uuid.uuid4().hex)
        )
        held = list(write.leases)
    await client.aclose()


def workload(writes: int) -> tuple[list[NewRequest], list[list[NewRequest]]]:
    """The queue's first requests, and the children of each write's 8 pages."""
    space = UrlSpace(1)
    queued = [new_request(link_request(space.fresh(), "http://seed/")) for _ in range(5000)]
    plans = [
        [
            new_request(link_request(link, "http://page/"))
            for _ in range(8)
            for link in space.links()
        ]
        for _ in range(writes)
    ]
    return queued, plans


def profile(client: redis.Redis, url: str, writes: int, use_perf: bool) -> None:
    queued, plans = workload(writes)
    asyncio.run(write_batches(url, [queued]))  # fills the queue (and leases 8)
    pid = int(client.info("server")["process_id"])
    recorder = None
    data = Path(tempfile.mkdtemp()) / "perf.data"
    if use_perf:
        command = ["perf", "record", "-q", "-o", str(data), "-p", str(pid)]
        recorder = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    pages = 8 * writes
    real = measured(client, lambda: asyncio.run(write_batches(url, plans)))
    print(f"{writes} writes of 8 pages: {real.per_page(pages)}")
    if recorder is not None:
        perf_report(recorder, data)
    floor = measured(client, lambda: asyncio.run(echo_calls(url, real)))
    print(
        f"their floor, as many round trips and bytes to {ECHO!r}: {floor.per_page(pages)}; "
        f"the frontier's own work is {(real.cpu - floor.cpu) / pages * 1e6:.0f} us a page"
    )
    paired = measured(client, lambda: asyncio.run(echo_calls(url, real, per_trip=2)))
    print(
        f"the same calls two to a round trip (the link check sent with the write before): "
        f"{paired.per_page(pages)}"
    )


def sections(writes: int) -> None:
    """The same writes on a fresh server through the probed script: each section's time."""
    queued, plans = workload(writes)
    with tempfile.TemporaryDirectory() as workdir, fresh_redis(Path(workdir)) as (client, url):
        asyncio.run(write_batches(url, [queued]))
        client.config_resetstat()
        asyncio.run(write_batches(url, plans, probe=True))
        for line in turn_sections.report(client):
            print(line)


def perf_report(recorder: subprocess.Popen[bytes], data: Path) -> None:
    recorder.send_signal(signal.SIGINT)
    recorder.wait()
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", "symbol", "--stdio"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    rows = [line for line in report.splitlines() if line.strip() and not line.startswith("#")]
    kernel = sum(float(row.split("%")[0]) for row in rows if "[k]" in row)
    lookups = sum(float(row.split("%")[0]) for row in rows if SET_LOOKUP.search(row))
    print(
        f"perf: {kernel:.0f}% of Redis's samples in the kernel; dict lookups ({SET_LOOKUP.pattern})"
        f" {lookups / (100 - kernel):.0%} of the rest; its top functions:"
    )
    for row in rows[:12]:
        print("   ", " ".join(row.split()[:3]))


def lookup_cost(client: redis.Redis) -> None:
    members = [os.urandom(12) for _ in range(SET_SIZE)]
    for start in range(0, SET_SIZE, 1000):
        client.sadd("lookup", *members[start : start + 1000])
    draws: dict[str, Callable[[], list[bytes]]] = {
        "present": lambda: random.sample(members, LOOKUPS),
        "absent": lambda: [os.urandom(12) for _ in range(LOOKUPS)],
    }
    for label, draw in draws.items():
        batches = [draw() for _ in range(300)]
        client.config_resetstat()
        for batch in batches:
            client.smismember("lookup", batch)
        per_call = client.info("commandstats")["cmdstat_smismember"]["usec_per_call"]
        print(
            f"SMISMEMBER of {LOOKUPS} {label} members, {SET_SIZE:,}-member set: "
            f"{per_call:.0f} us ({per_call / LOOKUPS:.2f} us a lookup)"
        )


# What one step of a script costs, measured as 100 of them in a script against the same script
# without them: (the step, its script, the script without it, the arguments of both).
BODY, FIELDS = b"b" * 60, [f"f{n}" for n in range(100)]
LUA_STEPS: tuple[tuple[str, str, str, list[str | bytes]], ...] = (
    (
        "a redis.call (GET of a short string)",
        "for _ = 1, 100 do redis.call('GET', 'k') end",
        "",
        [],
    ),
    (
        "a 60-byte string made in Lua",
        "local t = {} for i = 1, 100 do t[i] = ARGV[1] .. i end",
        "",
        [BODY],
    ),
    ("a 60-byte argument", "", "", [BODY] * 100),
    (
        "a 60-byte field read back (one HMGET of 100)",
        "redis.call('HMGET', 'h', unpack(ARGV))",
        "",
        list(FIELDS),
    ),
)


def lua_steps(client: redis.Redis, calls: int = 3000) -> None:
    client.set("k", "5")
    client.hset("h", mapping=dict.fromkeys(FIELDS, BODY))

    def cpu_per_call(body: str, args: list[str | bytes]) -> float:
        script = client.register_script(body + " return 0")
        before = redis_cpu(client)
        for start in range(0, calls, 100):
            pipe = client.pipeline(transaction=False)
            for _ in range(min(100, calls - start)):
                script(args=args, client=pipe)
            pipe.execute()
        return (redis_cpu(client) - before) / calls

    for step, body, without, args in LUA_STEPS:
        unit = (cpu_per_call(body, args) - cpu_per_call(without, [] if not body else args)) / 100
        print(f"{step}: {unit * 1e6:.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.redis_profile", description=__doc__)
    parser.add_argument("--writes", type=int, default=1500)
    parser.add_argument("--no-perf", action="store_true")
    args = parser.parse_args()
    use_perf = not args.no_perf and shutil.which("perf") is not None
    with tempfile.TemporaryDirectory() as workdir, fresh_redis(Path(workdir)) as (client, url):
        profile(client, url, args.writes, use_perf)
        lookup_cost(client)
        lua_steps(client)
    sections(args.writes)


if __name__ == "__main__":
    main()
