"""The project's page-init steps run before the spider's own ``playwright_page_init_callback``,
which the shared session and the shared cookie jar used to replace."""

from __future__ import annotations

import asyncio
from typing import Any

from scrapy import Request
from scrapy.utils.misc import load_object

from crawler.browser_page_init import CALLBACK_META, add_step

CALLS: list[str] = []


async def first_step(page: Any, request: Request) -> None:
    CALLS.append("first")


async def second_step(page: Any, request: Request) -> None:
    CALLS.append("second")


async def spider_s_own(page: Any, request: Request) -> None:
    CALLS.append(f"own {page}")


def init_page(request: Request) -> None:
    """What scrapy-playwright does before navigating."""
    callback = load_object(request.meta[CALLBACK_META])
    asyncio.run(callback("page", request))


def test_steps_run_in_order_then_the_spider_s_own_callback_once_each() -> None:
    CALLS.clear()
    request = Request("http://e.com/", meta={CALLBACK_META: spider_s_own})
    for step in (first_step, second_step, first_step):
        add_step(request, f"{__name__}.{step.__name__}")
    init_page(request)
    assert CALLS == ["first", "second", "own page"]
    CALLS.clear()
    init_page(request.replace())  # a retry's copy: its steps, once given, are not run again
    assert CALLS == ["own page"]


def test_a_step_added_again_keeps_the_spider_s_callback() -> None:
    CALLS.clear()
    request = Request("http://e.com/", meta={CALLBACK_META: f"{__name__}.spider_s_own"})
    add_step(request, f"{__name__}.first_step")
    add_step(request, f"{__name__}.second_step")  # a second middleware on the same request
    init_page(request)
    assert CALLS == ["first", "second", "own page"]
