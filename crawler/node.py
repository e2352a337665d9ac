"""Identity of one crawler node (process) inside the cluster."""

from __future__ import annotations

import os
import socket


def resolve_node_id(configured: str) -> str:
    """Return the configured node id, or ``<hostname>-<pid>`` when it is empty."""
    configured = configured.strip()
    if configured:
        return configured
    return f"{socket.gethostname()}-{os.getpid()}"
