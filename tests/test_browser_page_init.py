"""The project's page-init steps run before the spider's own ``playwright_page_init_callback``,
which the shared session and the shared cookie jar used to replace."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
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


async def failing_step(page: Any, request: Request) -> None:
    raise ValueError("a cookie Playwright refused")


def test_a_step_that_raises_leaves_the_others_and_the_spider_s_callback_to_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    CALLS.clear()
    request = Request("http://e.com/", meta={CALLBACK_META: spider_s_own})
    add_step(request, f"{__name__}.failing_step")
    add_step(request, f"{__name__}.first_step")
    init_page(request)
    assert CALLS == ["first", "own page"]
    assert "Page-init step tests.test_browser_page_init.failing_step failed" in caplog.text


def test_a_child_that_asks_for_no_callback_of_its_own_gets_none() -> None:
    """A child built from its parent's meta with ``playwright_page_init_callback=None`` ran
    the parent's callback, which the meta still named (a review)."""
    CALLS.clear()
    parent = Request("http://e.com/", meta={CALLBACK_META: spider_s_own})
    add_step(parent, f"{__name__}.first_step")
    child = Request("http://e.com/2", meta={**parent.meta, CALLBACK_META: None})
    add_step(child, f"{__name__}.second_step")
    init_page(child)
    assert CALLS == ["first", "second"]
