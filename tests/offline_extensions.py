"""The node's extensions turned off for a crawler built only to look at its settings and
spider: they would connect to Redis or need a reactor. Not the ledger, which cluster mode needs
on (``crawler.cluster_required``): it connects only as the spider opens."""

from __future__ import annotations

from crawler.addon import COMPONENTS

LEDGER = "crawler.extensions.ledger.LedgerExtension"
OFFLINE_EXTENSIONS: dict[str, int | None] = {
    path: None for path in COMPONENTS["EXTENSIONS"] if path != LEDGER
}
