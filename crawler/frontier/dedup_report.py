"""The scheduler's dedup stats and logs: what each ``complete`` dropped, and Bloom gauges.

Exact and compact drops count as ``dupefilter/filtered``. A Bloom filter cannot
tell a false positive from a URL really seen, so its drops count as
``dupefilter/bloom_maybe_seen``, each logged at DEBUG; a periodic INFO line
sums them up with the number of false positives to expect among them (new URLs
since the last line x the filter's estimated false-positive rate), and warns when
that rate is above ``FRONTIER_BLOOM_ERROR_RATE`` (the last slice is over capacity).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable

import orjson
from scrapy import Request
from scrapy.statscollectors import StatsCollector
from scrapy.utils.request import referer_str

from crawler.frontier import codec
from crawler.frontier.client import Completion, NewRequest
from crawler.frontier.dedup import DedupConfig, DedupMode
from crawler.frontier.dedup_bloom import BloomState, bloom_layout

logger = logging.getLogger(__name__)
# Where Scrapy's RFPDupeFilter logs its duplicates, in its words (its tests pin them down).
dupefilter_logger = logging.getLogger("scrapy.dupefilters")

SUMMARY_INTERVAL = 60.0  # seconds between the Bloom filter's INFO lines (when it dropped any)


def _url(body: bytes) -> str:
    try:
        return str(orjson.loads(codec.plain(body)).get("url"))
    except (ValueError, AttributeError):  # orjson.JSONDecodeError is a ValueError
        return "<unreadable request>"


def _described(body: bytes) -> tuple[str, str | None]:
    """A stored request as Scrapy's dupefilter names it: ``<GET url>``, and its referer."""
    try:
        record = codec.loads(body)
        headers = record.get("headers") or {}
    except (ValueError, AttributeError, TypeError):
        return "<unreadable request>", None
    referer = next(
        (values[0] for name, values in headers.items() if name.lower() == "referer" and values),
        None,
    )
    if isinstance(referer, bytes):  # as Scrapy's referer_str writes it
        referer = referer.decode("utf-8", errors="replace")
    request = f"<{record.get('method', 'GET')} {record.get('url')}>"
    return request, None if referer is None else str(referer)


def _of_request(request: Request) -> tuple[str, str | None]:
    return repr(request), referer_str(request)


class DedupReport:
    def __init__(
        self,
        stats: StatsCollector,
        config: DedupConfig,
        debug: bool = False,
        dropped: Callable[[Iterable[bytes]], None] | None = None,
    ) -> None:
        """``dropped``: called with the records of the requests each ``complete`` dropped (as
        they are read: a hook that needs none reads none)."""
        self.stats = stats
        self._dropped = dropped
        self.config = config
        self.debug = debug  # DUPEFILTER_DEBUG: log every filtered request, not only the first
        self._logged_one = False
        self.bloom = config.mode is DedupMode.BLOOM
        self._layout = bloom_layout(config.capacity, config.error_rate) if self.bloom else ()
        self._layout_seen = False  # the filter's layout compared with this node's
        self._state: BloomState | None = None
        self._maybe_seen = 0  # Bloom drops since the last summary
        self._inserted = 0  # fingerprints the Bloom filter took since the last summary
        self._last_summary = time.monotonic()

    def filtered(self, request: Request) -> None:
        """Log a duplicate ``request`` as Scrapy's RFPDupeFilter does: the first, or all with
        DUPEFILTER_DEBUG."""
        self._log_filtered(functools.partial(_of_request, request))

    def _log_filtered(self, described: Callable[[], tuple[str, str | None]]) -> None:
        """The request is described (its record read) only when it is logged."""
        if not self.debug and self._logged_one:
            return
        self._logged_one = True
        if not dupefilter_logger.isEnabledFor(logging.DEBUG):
            return
        request, referer = described()
        if self.debug:
            dupefilter_logger.debug(
                "Filtered duplicate request: %(request)s (referer: %(referer)s)",
                {"request": request, "referer": referer},
            )
        else:
            dupefilter_logger.debug(
                "Filtered duplicate request: %(request)s - no more duplicates will be shown "
                "(see DUPEFILTER_DEBUG to show all duplicates)",
                {"request": request},
            )

    def completed(self, result: Completion, children: list[NewRequest]) -> None:
        """Count what one ``complete`` call dropped as already seen."""
        if result.dropped and self._dropped is not None:
            self._dropped(children[index].body for index in result.dropped)
        if not self.bloom:
            if result.duplicates:
                self.stats.inc_value("dupefilter/filtered", result.duplicates)
                for index in result.dropped if self.debug or not self._logged_one else ():
                    self._log_filtered(functools.partial(_described, children[index].body))
            return
        self._inserted += result.added - sum(1 for child in children if not child.fingerprint)
        if not result.duplicates:
            return
        self.stats.inc_value("dupefilter/bloom_maybe_seen", result.duplicates)
        self._maybe_seen += result.duplicates
        if logger.isEnabledFor(logging.DEBUG):
            for index in result.dropped:
                logger.debug(
                    "Bloom dupefilter: %s maybe seen before, dropped", _url(children[index].body)
                )

    def bloom_state(self, state: BloomState) -> None:
        """The filter as read on a heartbeat: gauges, and the summary when it is due."""
        if state.layout and not self._layout_seen:
            self._layout_seen = True
            self._check_layout(state)
        self._state = state
        self.stats.set_value("dupefilter/bloom_fill", round(state.fill, 6))
        self.stats.set_value("dupefilter/bloom_fp_rate", state.false_positive_rate)
        self.stats.set_value("dupefilter/bloom_slices", state.slices)
        if time.monotonic() - self._last_summary >= SUMMARY_INTERVAL:
            self.summary()

    def _check_layout(self, state: BloomState) -> None:
        """Say once that the crawl's filter is not the one this node's settings make."""
        if state.layout == self._layout:
            return
        first = state.layout[0]
        logger.warning(
            "Bloom dupefilter: the crawl's filter was made by a node with another "
            "FRONTIER_DEDUP_CAPACITY or FRONTIER_BLOOM_ERROR_RATE than this node's (%d, %s), or "
            "by another version: it keeps its own layout (a first slice for %d URLs), and this "
            "node's settings are not used (give every node the same ones)",
            self.config.capacity,
            self.config.error_rate,
            first.capacity,
        )

    def summary(self) -> None:
        """Log the Bloom drops since the last summary (none logged when there were none)."""
        elapsed = time.monotonic() - self._last_summary
        self._last_summary += elapsed
        maybe_seen, inserted = self._maybe_seen, self._inserted
        self._maybe_seen = self._inserted = 0
        if self._state is None or not maybe_seen:
            return
        rate = self._state.false_positive_rate
        logger.info(
            "Bloom dupefilter: %d requests dropped as maybe seen in %.0fs; about %.2f of them "
            "false positives (%d new URLs x estimated false-positive rate %.3g); "
            "%d slices, the newest %.0f%% full",
            maybe_seen,
            elapsed,
            inserted * rate,
            inserted,
            rate,
            self._state.slices,
            100 * self._state.fill,
        )
        designed = self._state.designed_rate
        if rate > designed:  # this node's FRONTIER_BLOOM_ERROR_RATE may not be the filter's
            logger.warning(
                "Bloom dupefilter: estimated false-positive rate %.3g is above the %.3g the "
                "filter was sized for: its last slice is over capacity; purge it or use a larger "
                "FRONTIER_DEDUP_CAPACITY next crawl",
                rate,
                designed,
            )
