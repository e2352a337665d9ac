"""A plain spider whose start URLs on one site all reach the robots.txt check at once."""

from __future__ import annotations

from typing import Any

import scrapy
from scrapy.http import Response


class RobotsBurstSpider(scrapy.Spider):
    name = "robots_burst"
    custom_settings = {"ROBOTSTXT_OBEY": True}  # noqa: RUF012  # Scrapy declares it

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/p/{index}.html" for index in range(20)]

    def parse(self, response: Response) -> dict[str, Any]:
        return {"url": response.url}
