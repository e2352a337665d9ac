"""Identity of one crawler node (process) inside the cluster.

The node id is written into Redis records (``<node>\\t<score>`` lease records, the nodes
sorted set), Kafka headers and log lines, so it is restricted to letters, digits and
``._:@-`` (at most 128 characters): a TAB or a newline in ``CRAWLER_NODE_ID`` would break
every heartbeat and every record that carries it.
"""

from __future__ import annotations

import os
import re
import socket

NODE_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
DEFAULT_CRAWL_ID = "default"  # settings.base's CRAWLER_CRAWL_ID


def resolve_node_id(configured: str) -> str:
    """Return the configured node id, or ``<hostname>-<pid>`` when it is empty; raise
    ``ValueError`` naming ``CRAWLER_NODE_ID`` for one that Redis records cannot carry."""
    configured = configured.strip()
    if not configured:
        return f"{socket.gethostname()}-{os.getpid()}"
    if not NODE_ID.fullmatch(configured):
        raise ValueError(
            f"CRAWLER_NODE_ID={configured!r} must be 1 to 128 letters, digits or ._:@- "
            "(it is written into Redis records, Kafka headers and logs)"
        )
    return configured


def resolve_crawl_id(configured: object) -> str:
    """``CRAWLER_CRAWL_ID``: non-empty, without ``:``, ``{`` or ``}`` (it is part of Redis
    keys: the ledger's, the start claim's; and of Kafka headers); ValueError naming it.
    Settings without it (not the project's) give ``default``, the project's default."""
    crawl_id = str(configured if configured is not None else DEFAULT_CRAWL_ID)
    if not crawl_id or any(c in crawl_id for c in ":{}"):
        raise ValueError(
            f"CRAWLER_CRAWL_ID={crawl_id!r} must be non-empty, without ':', '{{' or '}}'"
        )
    return crawl_id
