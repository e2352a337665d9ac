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
