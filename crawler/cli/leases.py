"""``crawler leases <spider>``: the leases of a spider by node, with their age and URLs."""

from __future__ import annotations

import argparse
from dataclasses import asdict

import orjson
from scrapy.settings import Settings

from crawler.cli.config import add_redis_option, project_settings, redis_client
from crawler.cli.spiders import require_spider
from crawler.frontier.inspect import FrontierInspector, NodeLeases
from crawler.settings_values import get_float


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("leases", help="the leases of a spider by node, age and URLs")
    parser.add_argument("spider")
    add_redis_option(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object for scripts")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = project_settings()
    require_spider(args.spider, settings)
    lease_timeout = get_float(Settings(settings), "FRONTIER_LEASE_TIMEOUT")
    client = redis_client(args)
    try:
        nodes = FrontierInspector(client, args.spider).leases(int(lease_timeout * 1000))
    finally:
        client.close()
    if args.json:
        shown = {
            "spider": args.spider,
            "leases": sum(node.leases for node in nodes),
            "lease_timeout": lease_timeout,
            "nodes": [asdict(node) for node in nodes],
        }
        print(orjson.dumps(shown).decode())
    else:
        print_leases(args.spider, lease_timeout, nodes)
    return 0


def print_leases(spider: str, lease_timeout: float, nodes: list[NodeLeases]) -> None:
    total = sum(node.leases for node in nodes)
    print(f"{spider}: {total} leases held by {len(nodes)} nodes")
    if not nodes:
        return
    print(
        "  (age estimated as now - (deadline - the node's lease timeout, as its heartbeat "
        f"records it, else FRONTIER_LEASE_TIMEOUT {lease_timeout:g}s): the time since the lease "
        "was taken or its node's heartbeat last extended it)"
    )
    for node in nodes:
        timeout = "not recorded" if node.lease_timeout is None else f"{node.lease_timeout:g}s"
        print(
            f"  {node.node}  {node.leases} leases  oldest {node.oldest_age:.1f}s  "
            f"{node.expired} expired  (lease timeout {timeout})"
        )
        for url in node.urls:
            print(f"    {url}")
        if node.leases > len(node.urls):
            print(f"    ... and {node.leases - len(node.urls)} more")
