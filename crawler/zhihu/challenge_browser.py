"""``BrowserChallengeSolver``: a ``__zse_ck`` challenge page run in Chromium (no Scrapy imports).

Each solve launches Debian's Chromium headless through async Playwright (no ``playwright
install``), gives a fresh context the session's cookies (without a stale ``__zse_ck``) and the
crawler's user agent, opens the challenged URL and waits until the page's script has set
``__zse_ck``. The whole solve, launch included, is bounded by ``timeout``; the browser is always
closed, errors or not. Solves are rare (once per account and cookie lifetime), so no browser
is kept between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
from collections.abc import Callable
from typing import Any

from playwright.async_api import Browser, BrowserContext, async_playwright
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout

from crawler.sessions import Cookie, Session
from crawler.sessions.cookies import CookieFormatError, cookie_from_json
from crawler.zhihu.challenge import ZSE_CK, ChallengeFailed

CLOSE_TIMEOUT = 5.0  # seconds for closing the browser
POLL = 0.05  # seconds between looks for the cookie

# a session's cookies as Playwright's add_cookies wants them, for a page at the URL
BrowserCookies = Callable[[Session, str], list[dict[str, Any]]]


class BrowserChallengeSolver:
    def __init__(
        self, executable: str, timeout: float, user_agent: str, browser_cookies: BrowserCookies
    ) -> None:
        self.executable = executable
        self.timeout = timeout
        self.user_agent = user_agent
        self.browser_cookies = browser_cookies

    async def solve(self, url: str, session: Session) -> Cookie:
        if shutil.which(self.executable) is None:
            raise ChallengeFailed("no_browser", f"{self.executable} is not an executable")
        unsolved = dataclasses.replace(
            session, cookies=tuple(c for c in session.cookies if c.name != ZSE_CK)
        )
        try:
            async with async_playwright() as playwright:
                browser: Browser | None = None
                try:
                    async with asyncio.timeout(self.timeout):
                        browser = await playwright.chromium.launch(
                            executable_path=self.executable, headless=True
                        )
                        context = await browser.new_context(user_agent=self.user_agent)
                        cookies: Any = self.browser_cookies(unsolved, url)  # SetCookieParam
                        await context.add_cookies(cookies)
                        page = await context.new_page()
                        page.set_default_timeout(self.timeout * 1000)
                        await page.goto(url, wait_until="commit")  # the script then reloads
                        return await _wait_for_zse_ck(context)
                finally:
                    if browser is not None:
                        with contextlib.suppress(TimeoutError, PlaywrightError):
                            await asyncio.wait_for(browser.close(), CLOSE_TIMEOUT)
        except (TimeoutError, PlaywrightTimeout):
            raise ChallengeFailed(
                "timeout", f"no {ZSE_CK} cookie from {url} within {self.timeout:g} s"
            ) from None
        except PlaywrightError as exc:
            reason = (exc.message or type(exc).__name__).splitlines()[0]
            raise ChallengeFailed("browser_error", f"Chromium failed on {url}: {reason}") from None
        except CookieFormatError as exc:
            raise ChallengeFailed("browser_error", f"{url} set a bad {ZSE_CK}: {exc}") from None


async def _wait_for_zse_ck(context: BrowserContext) -> Cookie:
    while True:
        for index, found in enumerate(await context.cookies(), start=1):
            if found.get("name") == ZSE_CK:
                return cookie_from_json(dict(found), f"browser cookie {index}")
        await asyncio.sleep(POLL)
