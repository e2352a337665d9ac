"""Running a test's coroutine to completion on a fresh event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    """The result of ``coro`` (any awaitable, not only a coroutine), on its own loop."""

    async def main() -> T:
        return await coro

    return asyncio.run(main())
