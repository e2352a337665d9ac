"""``CappedDecompressionMiddleware``: Scrapy's ``HttpCompressionMiddleware`` with a sane cap.

What Scrapy 2.19 already does: it inflates gzip, deflate, br and zstd bodies in 64 KiB
chunks and stops as soon as the inflated size passes ``DOWNLOAD_MAXSIZE`` (or the
request's ``download_maxsize``), raising ``IgnoreRequest``. What made a 2 GiB gzip bomb
take a node to 2.2 GB: that cap is ``DOWNLOAD_MAXSIZE``, 1 GiB by default, a limit
meant for the bytes on the wire (the bomb's were 2 MB), so the bomb was inflated to
1 GiB (and copied) before it was dropped; and an ``IgnoreRequest`` raised in
``process_response`` never reached the frontier (see ``LeaseFailureMiddleware``).

This subclass inflates with the same code under the smaller of the two caps that are
set (> 0): ``DOWNLOAD_MAXSIZE`` (or meta ``download_maxsize``) and
``DECOMPRESSION_MAXSIZE`` (default 64 MiB). A body that passes it is dropped: a WARNING
names the URL (credentials masked), ``decompression/too_large`` is counted and the
request fails with that reason (``RefusedRequest``). It replaces Scrapy's middleware at
the same order (590) and obeys ``COMPRESSION_ENABLED``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.utils._compression import _DecompressionMaxSizeExceeded  # Scrapy's own cap signal

from crawler.middlewares.refused import RefusedRequest
from crawler.settings_values import get_int
from crawler.url_credentials import mask_secrets

logger = logging.getLogger(__name__)

REASON = "decompression/too_large"
DEFAULT_MAXSIZE = 64 * 1024 * 1024


@dataclass(frozen=True)
class DecompressionSettings:
    maxsize: int  # bytes, 0 = DOWNLOAD_MAXSIZE only

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> DecompressionSettings:
        maxsize = get_int(settings, "DECOMPRESSION_MAXSIZE", DEFAULT_MAXSIZE)
        if maxsize < 0:
            raise ValueError(
                f"DECOMPRESSION_MAXSIZE={maxsize!r} must be >= 0 (bytes; 0 = DOWNLOAD_MAXSIZE only)"
            )
        return cls(maxsize=maxsize)


def smaller_cap(download_maxsize: int, decompression_maxsize: int) -> int:
    """The smaller of the caps that are set (> 0); 0 when neither is."""
    return min((cap for cap in (download_maxsize, decompression_maxsize) if cap > 0), default=0)


class CappedDecompressionMiddleware(HttpCompressionMiddleware):
    # Scrapy's from_crawler: NotConfigured with COMPRESSION_ENABLED off, else cls(crawler=...)
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler=crawler)
        self.config = DecompressionSettings.from_settings(crawler.settings)

    def process_response(
        self,
        request: Request,
        response: Response,
        spider: Spider | None = None,  # the signature of Scrapy's (never passed)
    ) -> Request | Response:
        try:
            return super().process_response(request, response)
        except RefusedRequest as exc:
            logger.warning(
                "Dropped %s (%d B compressed): %s",
                mask_secrets(response.url),
                len(response.body),
                exc,
            )
            if self.stats is not None:
                self.stats.inc_value(REASON)
            raise

    def _handle_encoding(
        self, body: bytes, content_encoding: list[bytes], max_size: int
    ) -> tuple[bytes, list[bytes]]:
        cap = smaller_cap(max_size, self.config.maxsize)
        try:
            return super()._handle_encoding(body, content_encoding, cap)
        except _DecompressionMaxSizeExceeded as exc:
            raise RefusedRequest(
                REASON,
                f"body over {cap} B when inflated (the smaller of DOWNLOAD_MAXSIZE and "
                f"DECOMPRESSION_MAXSIZE), stopped at {exc.decompressed_size} B",
            ) from None
