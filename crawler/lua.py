"""The project's one Lua script loader, and the helpers that read Redis replies as text or bytes.

Scripts live next to the code that runs them, in ``<package>/lua/<name>.lua``
(``crawler.frontier``, ``crawler.politeness``, ``crawler.sessions``, ``crawler.cookies``);
they are read from the installed package, so they work from a wheel too. No Scrapy imports.
"""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def script_text(package: str, name: str) -> str:
    """The source of ``<package>/lua/<name>.lua``."""
    return resources.files(package).joinpath(f"lua/{name}.lua").read_text()


def frontier_script(*names: str) -> str:
    """The frontier's script made of ``crawler/frontier/lua/<name>.lua`` for each of ``names``,
    in order: snippets that define functions, then the body that uses them."""
    return "\n".join(script_text("crawler.frontier", name) for name in names)


def text(value: object) -> str:
    """A Redis reply (bytes or str) as text; undecodable bytes are replaced."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def data(value: bytes | str) -> bytes:
    """A Redis reply (bytes or str, as the client decodes) as bytes."""
    return value if isinstance(value, bytes) else value.encode()
