"""Page-init steps of this project's middlewares, run before a spider's own
``playwright_page_init_callback``.

scrapy-playwright runs one page-init callback a request (``meta['playwright_page_init_callback']``,
a callable or its import path), after creating the page and before navigating. A middleware
that needs the page (the shared session's cookies, the shared cookie jar) adds a step here
instead of replacing the spider's callback: ``run_steps`` becomes the callback, runs the
steps in the order they were added, then the spider's own callback, kept in
``meta['_user_page_init_callback']``.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.utils.misc import load_object

CALLBACK_META = "playwright_page_init_callback"
STEPS_META = "_page_init_steps"  # import paths of the steps, run first (taken when they run)
USER_META = "_user_page_init_callback"  # the spider's own callback, run after them
RUN_STEPS = "crawler.browser_page_init.run_steps"


def add_step(request: Request, path: str) -> None:
    """Run the coroutine function ``path`` names with the page and ``request`` before the
    page navigates, and the spider's own page-init callback after it."""
    steps: list[str] = request.meta.setdefault(STEPS_META, [])
    if path not in steps:
        steps.append(path)
    given = request.meta.get(CALLBACK_META)
    if given is not None and given != RUN_STEPS:
        request.meta[USER_META] = given
    request.meta[CALLBACK_META] = RUN_STEPS


async def run_steps(page: Any, request: Request) -> None:
    """The page-init callback of a request that has steps: they run once (a copy of the
    request, a retry or a child given its meta, gets its steps from the middlewares again)."""
    for path in request.meta.pop(STEPS_META, []):
        await load_object(path)(page, request)
    own = request.meta.get(USER_META)
    if own:
        await load_object(own)(page, request)
