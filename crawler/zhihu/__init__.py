"""Zhihu: seed recognition, request signing, parsers, items and privacy (no Scrapy imports).

The Scrapy parts are :mod:`crawler.spiders.zhihu` and :mod:`crawler.zhihu.middleware`.
See docs/zhihu.md.
"""

from __future__ import annotations
