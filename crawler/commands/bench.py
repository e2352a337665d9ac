"""``scrapy bench``, standalone whatever REDIS_URL says (``crawler.standalone_commands``)."""

from __future__ import annotations

from typing import Any, ClassVar

from scrapy.commands import bench

from crawler.standalone_commands import marked


class Command(bench.Command):
    default_settings: ClassVar[dict[str, Any]] = marked(bench.Command, "bench")
