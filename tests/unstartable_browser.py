"""A scrapy-playwright browser provider (``PLAYWRIGHT_BROWSER_PROVIDER``) whose start fails,
as a Playwright driver that cannot start would."""

from __future__ import annotations

from typing import Any


class UnstartableBrowserProvider:
    def __init__(self, config: Any) -> None:
        self.config = config

    async def start(self) -> None:
        raise RuntimeError("the Playwright driver cannot start (test provider)")

    async def close(self) -> None:
        return None
