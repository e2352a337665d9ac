"""Login providers: where fresh cookies come from when a session must be (re)made.

A provider is anything with ``async login(account) -> Sequence[Cookie]``. The
Playwright providers drive Debian's Chromium (``/usr/bin/chromium``; no
``playwright install``) headless, harvest every cookie of the browser context
(HttpOnly included) and always close page, context and browser, errors or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import segno
from playwright.async_api import BrowserContext, Page, async_playwright
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from crawler.sessions.cookies import cookie_from_json, load_cookie_file
from crawler.sessions.models import Cookie, LoginFailed

logger = logging.getLogger(__name__)

CLOSE_TIMEOUT = 5.0  # seconds for closing a login page or context

CHROMIUM = "/usr/bin/chromium"


class LoginProvider(Protocol):
    async def login(self, account: str) -> Sequence[Cookie]:
        """Log ``account`` in and return all its cookies; raise :class:`LoginFailed`."""


class CookieImportProvider:
    """Cookies exported from a browser, per account; the file is re-read at every login,
    so an operator refreshes a session by replacing the file."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        self.files = dict(files)

    async def login(self, account: str) -> Sequence[Cookie]:
        path = self.files.get(account)
        if path is None:
            raise LoginFailed(f"no cookie file configured for account {account!r}")
        return await asyncio.to_thread(load_cookie_file, path)


@dataclass(frozen=True, slots=True)
class BrowserConfig:
    executable_path: str = CHROMIUM
    headless: bool = True
    timeout: float = 60.0  # seconds for the whole login, page loads included
    poll: float = 0.2  # seconds between looks for the session cookie

    def __post_init__(self) -> None:
        if self.timeout <= 0 or self.poll <= 0:
            raise ValueError(f"timeout={self.timeout!r} and poll={self.poll!r} must be > 0")


def _check_url(url: str) -> None:
    if urlsplit(url).scheme not in {"http", "https"}:
        raise ValueError(f"url={url!r} must be an http(s) URL")


@dataclass(frozen=True, slots=True)
class Credentials:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class FormLoginConfig:
    url: str
    success_cookie: str  # the login worked once the context holds this cookie (e.g. z_c0)
    username_selector: str = "input[name=username]"
    password_selector: str = "input[type=password]"  # noqa: S105 - a CSS selector
    submit_selector: str = "[type=submit]"
    browser: BrowserConfig = field(default_factory=BrowserConfig)

    def __post_init__(self) -> None:
        _check_url(self.url)
        if not self.success_cookie:
            raise ValueError("success_cookie='' must name the cookie a successful login sets")


@dataclass(frozen=True, slots=True)
class QrChallenge:
    account: str
    png_path: Path  # screenshot of the QR element
    data: str | None  # what the code encodes, when the page exposes it


@dataclass(frozen=True, slots=True)
class QrLoginConfig:
    url: str
    success_cookie: str
    qr_selector: str = "#qr"
    qr_data_attribute: str | None = "data-qr"  # attribute holding the encoded link, if any
    png_path: Path = Path("qr-login.png")
    browser: BrowserConfig = field(default_factory=lambda: BrowserConfig(timeout=180.0))
    qr_timeout: float = 10.0  # seconds for the QR element to show once the page has loaded

    def __post_init__(self) -> None:
        _check_url(self.url)
        if not self.success_cookie:
            raise ValueError("success_cookie='' must name the cookie a successful login sets")
        if self.qr_timeout <= 0:
            raise ValueError(f"qr_timeout={self.qr_timeout!r} must be > 0")


def print_qr(challenge: QrChallenge) -> None:
    """Show the code in the terminal (re-encoded with segno when its link is known)."""
    if challenge.data:
        segno.make(challenge.data, error="m").terminal(compact=True)
    print(f"Scan the QR code to log in {challenge.account} (image: {challenge.png_path})")


@asynccontextmanager
async def _browser_page(config: BrowserConfig) -> AsyncIterator[tuple[BrowserContext, Page]]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=config.executable_path, headless=config.headless
        )
        try:
            context = await browser.new_context()
            page = await context.new_page()
            page.set_default_timeout(config.timeout * 1000)
            try:
                yield context, page
            finally:
                # Closing a page that is navigating (a login page redirecting) can hang:
                # bound each step; closing the browser ends whatever is left.
                for closing in (page.close, context.close):
                    with contextlib.suppress(TimeoutError, PlaywrightError):
                        await asyncio.wait_for(closing(), CLOSE_TIMEOUT)
        finally:
            await browser.close()


async def _wait_for_cookie(context: BrowserContext, name: str, poll: float) -> list[Cookie]:
    while True:
        found = await context.cookies()
        if any(cookie.get("name") == name for cookie in found):
            return [
                cookie_from_json(dict(cookie), f"browser cookie {i}")
                for i, cookie in enumerate(found, start=1)
            ]
        await asyncio.sleep(poll)


async def _run_in_browser(
    kind: str,
    account: str,
    config: BrowserConfig,
    steps: Callable[[Page], Awaitable[None]],
    success_cookie: str,
) -> list[Cookie]:
    """Run ``steps`` on a fresh page, then wait for ``success_cookie``; return every cookie.

    Timeouts and browser errors become :class:`LoginFailed` with a one-line reason.
    """
    try:
        async with _browser_page(config) as (context, page):
            async with asyncio.timeout(config.timeout):  # the login, not the cleanup
                await steps(page)
                return await _wait_for_cookie(context, success_cookie, config.poll)
    except TimeoutError:
        raise LoginFailed(
            f"{kind} login of {account!r}: no {success_cookie!r} cookie after {config.timeout} s"
        ) from None
    except PlaywrightError as exc:
        reason = (exc.message or type(exc).__name__).splitlines()[0]
        raise LoginFailed(f"{kind} login of {account!r} failed: {reason}") from None


class PlaywrightFormLogin:
    """Fill and submit a login form; succeed when ``success_cookie`` appears."""

    def __init__(self, config: FormLoginConfig, credentials: Callable[[str], Credentials]) -> None:
        self.config = config
        self.credentials = credentials  # account -> username and password (env, vault, ...)

    async def login(self, account: str) -> Sequence[Cookie]:
        config = self.config
        secret = self.credentials(account)

        async def submit(page: Page) -> None:
            await page.goto(config.url)
            await page.fill(config.username_selector, secret.username)
            await page.fill(config.password_selector, secret.password)
            await page.click(config.submit_selector)

        return await _run_in_browser("form", account, config.browser, submit, config.success_cookie)


class PlaywrightQrLogin:
    """Show the page's QR code (PNG + terminal), then wait for a phone to scan it."""

    def __init__(
        self, config: QrLoginConfig, on_qr: Callable[[QrChallenge], None] = print_qr
    ) -> None:
        self.config = config
        self.on_qr = on_qr

    async def login(self, account: str) -> Sequence[Cookie]:
        config = self.config

        async def show_code(page: Page) -> None:
            await page.goto(config.url)
            element = page.locator(config.qr_selector).first
            try:
                await element.wait_for(state="visible", timeout=config.qr_timeout * 1000)
            except PlaywrightTimeoutError:
                raise LoginFailed(
                    f"QR login of {account!r}: no visible element matches the QR selector "
                    f"{config.qr_selector!r} (--qr-selector) on {config.url} after "
                    f"{config.qr_timeout} s"
                ) from None
            await element.screenshot(path=config.png_path)
            data = None
            if config.qr_data_attribute:
                data = await element.get_attribute(config.qr_data_attribute)
            self.on_qr(QrChallenge(account, config.png_path, data))
            logger.info("QR login of %s: waiting for the scan", account)

        return await _run_in_browser(
            "QR", account, config.browser, show_code, config.success_cookie
        )
