"""``CredentialMaskingLog``: no log line of a node shows the credentials of a URL.

Scrapy names requests in its own lines (``Error downloading <GET http://user:pw@host/>``,
``Gave up retrying <GET ...>``, ``Spider error processing <GET ...>``, ``Crawled (200)
<GET ...>``) and so do other libraries and tracebacks. This extension adds a filter to
every handler of the root logger that passes each record's message and traceback through
``crawler.url_credentials.mask_secrets`` (only records a handler emits are formatted).
Scrapy installs its root handler anew once the crawler's settings are final (after the
extensions are built), so the filter is added when the extension is built (the settings
lines) and again at ``spider_opened``, before the spider reads a seed or a request is
sent. ``LOG_MASK_CREDENTIALS = False`` turns it off.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings

from crawler.settings_values import get_bool
from crawler.url_credentials import mask_secrets

_TRACEBACKS = logging.Formatter()  # formats tracebacks as every logging.Formatter does


class MaskCredentialsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True  # a malformed record: the handler reports it as logging does
        masked = mask_secrets(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = mask_secrets(_TRACEBACKS.formatException(record.exc_info))
        return True


@dataclass(frozen=True)
class LogMaskingSettings:
    enabled: bool

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> LogMaskingSettings:
        return cls(enabled=get_bool(settings, "LOG_MASK_CREDENTIALS", True))


def install(root: logging.Logger) -> None:
    """Add the filter to every handler of ``root`` that does not have it yet."""
    for handler in root.handlers:
        if not any(isinstance(f, MaskCredentialsFilter) for f in handler.filters):
            handler.addFilter(MaskCredentialsFilter())


class CredentialMaskingLog:
    def __init__(self, crawler: Crawler) -> None:
        if not LogMaskingSettings.from_settings(crawler.settings).enabled:
            raise NotConfigured("LOG_MASK_CREDENTIALS is False")
        install(logging.getLogger())
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CredentialMaskingLog:
        return cls(crawler)

    def spider_opened(self) -> None:
        install(logging.getLogger())  # Scrapy's root handler was replaced since __init__
