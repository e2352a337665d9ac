"""The load generator's workload on the frontier of another commit (the baseline of
``bench.frontier_load``): run as a script by the load generator, with that commit's
``crawler`` package (``git archive``) first on the path, so its scripts and client are what
Redis sees.

    python bench/frontier_baseline.py TREE run|fill URL COUNT [--mode exact] [--nodes 12]

Only the client API every commit since the load generator's first baseline has
(``FrontierClient(redis, keys, node, dedup)``, ``lease``, ``complete``, ``heartbeat``,
``open_epoch``) and the crawler of then: one completion per page with every link's body,
full request JSON, the node's seen-cache.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("tree")
    parser.add_argument("action", choices=("run", "fill"))
    parser.add_argument("url")
    parser.add_argument("count", type=int)
    parser.add_argument("--mode", default="exact")
    parser.add_argument("--nodes", type=int, default=12)
    parser.add_argument("--seen-cache", type=int, default=100_000)
    args = parser.parse_args()
    sys.path[:0] = [args.tree, str(HERE.parent)]  # that commit's crawler, then this bench
    driver = Driver(args.url, args.mode, args.seen_cache)
    if args.action == "fill":
        asyncio.run(driver.fill(args.count))
    else:
        asyncio.run(driver.run(args.count, args.nodes))


class Driver:
    def __init__(self, url: str, mode: str, seen_cache: int) -> None:
        from bench.load_workload import UrlSpace  # noqa: PLC0415 - after the path is set

        self.url, self.mode, self.seen_cache = url, mode, seen_cache
        self.space = UrlSpace(1)

    def client(self, node: str) -> Any:
        from crawler.frontier.client import FrontierClient  # noqa: PLC0415
        from crawler.frontier.dedup import DedupConfig, DedupMode  # noqa: PLC0415
        from crawler.frontier.keys import FrontierKeys  # noqa: PLC0415
        from crawler.redis_connection import async_client  # noqa: PLC0415

        redis = async_client(self.url)
        keys = FrontierKeys.for_spider("load")
        return FrontierClient(redis, keys, node, DedupConfig(DedupMode(self.mode)))

    def new(self, url: str, parent: str) -> Any:
        from scrapy.utils.request import fingerprint  # noqa: PLC0415

        from bench.load_workload import SPIDER, link_request  # noqa: PLC0415
        from crawler.frontier import codec  # noqa: PLC0415
        from crawler.frontier.client import NewRequest  # noqa: PLC0415

        request = link_request(url, parent)
        body = codec.dumps(request.to_dict(spider=SPIDER))
        return NewRequest(fingerprint(request).hex(), -float(request.priority), body)

    async def fill(self, count: int) -> None:
        client = self.client("filler")
        for start in range(0, count, 500):
            size = min(500, count - start)
            batch = [self.new(self.space.fresh(), "http://seed/") for _ in range(size)]
            await client.complete(None, "done", batch)
        await client.redis.aclose()

    async def run(self, pages: int, nodes: int) -> None:
        await self.fill(2000)
        quota = [pages]
        await asyncio.gather(*(self.node(f"node-{n}", quota) for n in range(nodes)))

    async def node(self, name: str, quota: list[int]) -> None:
        import orjson  # noqa: PLC0415

        from bench.load_workload import HEARTBEAT_SECONDS, LEASE_BATCH  # noqa: PLC0415
        from crawler.frontier.seen_cache import SeenCache  # noqa: PLC0415

        client = self.client(name)
        loop = asyncio.get_running_loop()
        epoch = await client.open_epoch()
        cache = SeenCache(self.seen_cache)
        next_beat = loop.time() + HEARTBEAT_SECONDS
        try:
            while quota[0] > 0:
                leases = await client.lease(LEASE_BATCH, 60_000)
                for lease in leases:
                    parent = orjson.loads(lease.body)["url"]
                    children = []
                    for link in self.space.links():
                        child = self.new(link, parent)
                        if child.fingerprint not in cache:
                            cache.add(child.fingerprint)
                            children.append(child)
                    await client.complete(lease.id, "done", children)
                quota[0] -= len(leases)
                if loop.time() >= next_beat:
                    await client.heartbeat([], 60_000, 60_000, 100, epoch)
                    next_beat += HEARTBEAT_SECONDS
                if not leases:
                    await asyncio.sleep(0.01)
        finally:
            await client.redis.aclose()


if __name__ == "__main__":
    main()
