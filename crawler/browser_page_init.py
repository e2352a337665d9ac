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

import logging
from typing import Any

from scrapy import Request
from scrapy.utils.misc import load_object

CALLBACK_META = "playwright_page_init_callback"
STEPS_META = "_page_init_steps"  # import paths of the steps, run first (taken when they run)
USER_META = "_user_page_init_callback"  # the spider's own callback, run after them
RUN_STEPS = "crawler.browser_page_init.run_steps"

logger = logging.getLogger(__name__)


def add_step(request: Request, path: str) -> None:
    """Run the coroutine function ``path`` names with the page and ``request`` before the
    page navigates, and the spider's own page-init callback after it."""
    steps: list[str] = request.meta.setdefault(STEPS_META, [])
    if path not in steps:
        steps.append(path)
    given = request.meta.get(CALLBACK_META)
    if given != RUN_STEPS:  # the spider's own (None: none, whatever a parent's meta held)
        request.meta[USER_META] = given
    request.meta[CALLBACK_META] = RUN_STEPS


async def run_steps(page: Any, request: Request) -> None:
    """The page-init callback of a request that has steps: they run once (a copy of the
    request, a retry or a child given its meta, gets its steps from the middlewares again).
    A step that raises is logged and the others run, the spider's own callback too (which
    scrapy-playwright runs as it does without steps: what it raises is logged there)."""
    for path in request.meta.pop(STEPS_META, []):
        try:
            await load_object(path)(page, request)
        except Exception:
            logger.exception("Page-init step %s failed for %s", path, request.url)
    own = request.meta.get(USER_META)
    if own:
        await load_object(own)(page, request)
