"""``PasswordLogin``: a plain-HTTP login provider for the shared session store.

It visits ``explore`` for a guest ``d_c0`` and posts the account's username and password
to ``sign_in`` as JSON; the session it returns holds both cookies, so every node signs with
the same ``d_c0``. The password comes from the environment variable named by
``ZHIHU_PASSWORD_ENV`` (``{account}`` upper-cased, other characters than A-Z0-9 as ``_``).
Real Zhihu puts captchas and an encrypted form in front of its password login: there, log in
by QR code (``crawler sessions login zhihu <account> --qr ...``) or import cookies instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from urllib.parse import urlsplit

from crawler.sessions import Cookie, LoginFailed
from crawler.sessions.cookies import parse_set_cookie

TIMEOUT = 30.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def account_password(template: str, account: str) -> tuple[str, str]:
    """The environment variable that holds ``account``'s password, and its value ("": unset)."""
    variable = template.format(account=re.sub(r"[^A-Z0-9]", "_", account.upper()))
    return variable, os.environ.get(variable, "")


class PasswordLogin:
    def __init__(self, explore_url: str, sign_in_url: str, password_env: str, agent: str) -> None:
        self.explore_url = explore_url
        self.sign_in_url = sign_in_url
        self.password_env = password_env
        self.agent = agent
        self._opener = urllib.request.build_opener(_NoRedirect)

    async def login(self, account: str) -> Sequence[Cookie]:
        variable, password = account_password(self.password_env, account)
        if not password:
            raise LoginFailed(f"no password for zhihu account {account!r} in ${variable}")
        return await asyncio.to_thread(self._login, account, password)

    def _call(self, url: str, cookies: list[Cookie], body: bytes | None = None) -> list[Cookie]:
        headers = {"User-Agent": self.agent}
        if cookies:
            headers["Cookie"] = "; ".join(f"{c.name}={c.value}" for c in cookies)
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(  # noqa: S310 - http(s) base URLs are validated
            url, data=body, headers=headers, method="POST" if body is not None else "GET"
        )
        host = urlsplit(url).hostname or ""
        try:
            with self._opener.open(request, timeout=TIMEOUT) as response:
                return parse_set_cookie(response.headers.get_all("Set-Cookie") or [], host)
        except urllib.error.HTTPError as error:
            error.close()
            if error.code in (301, 302, 303):
                return parse_set_cookie(error.headers.get_all("Set-Cookie") or [], host)
            raise LoginFailed(f"{urlsplit(url).path} answered HTTP {error.code}") from None
        except OSError as exc:
            raise LoginFailed(f"{urlsplit(url).path} failed: {exc}") from None

    def _login(self, account: str, password: str) -> list[Cookie]:
        cookies = self._call(self.explore_url, [])
        form = json.dumps({"username": account, "password": password}).encode()
        cookies += self._call(self.sign_in_url, cookies, form)
        if not any(cookie.name == "z_c0" for cookie in cookies):
            raise LoginFailed(f"zhihu login of {account!r} set no z_c0 cookie")
        return cookies
