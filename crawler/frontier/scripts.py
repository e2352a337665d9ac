"""The frontier's Lua scripts (``crawler/frontier/lua/``), read from the package (no Scrapy)."""

from __future__ import annotations

from importlib import resources


def script_text(name: str) -> str:
    """The source of ``lua/<name>.lua``."""
    return resources.files("crawler.frontier").joinpath(f"lua/{name}.lua").read_text()
