"""A tiny login site on loopback: a form login, a QR login and a page that needs the cookie.

* ``GET /login`` shows a form; ``POST /login`` with the right password sets an HttpOnly
  ``session`` cookie and redirects to ``/me`` (``logins`` counts successes).
* ``GET /qr`` shows a QR image (``#qr``, its link in ``data-qr``) for a new token; the page's
  script polls ``/qr/<token>/status``, which sets the cookie once a test has called
  ``POST /qr/<token>/scan`` (or :meth:`LoginSite.scan`).
* ``GET /me`` answers 200 with the user for a live cookie, 401 otherwise
  (cookies live ``lifetime`` seconds).
* ``GET /members/<n>`` (``n < members``) are pages only a logged-in user sees (401 otherwise);
  page ``n`` links to ``2n+1`` and ``2n+2``. ``member_hits`` counts the pages served.
"""

from __future__ import annotations

import http.client
import secrets
import threading
import time
from collections import Counter
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlencode

import segno

from crawler.demo.server import BackgroundHTTPServer, QuietHandler

LOGIN_FORM = (
    b"<!doctype html><html><body><form method='post' action='/login'>"
    b"<input name='username' id='username'><input name='password' type='password' id='password'>"
    b"<button type='submit' id='submit'>Log in</button></form></body></html>"
)
QR_PAGE = """<!doctype html><html><body>
<img id="qr" alt="scan me" src="{uri}" data-qr="{link}">
<script>
async function poll() {{
  try {{
    const answer = await fetch('/qr/{token}/status');
    if (answer.status === 200) {{ location.href = '/me'; return; }}
  }} catch (error) {{}}  // a failed poll is retried, as a real login page does
  setTimeout(poll, 100);
}}
poll();
</script></body></html>"""


class LoginSite(BackgroundHTTPServer):
    def __init__(self, users: dict[str, str], lifetime: float = 3600.0, members: int = 0) -> None:
        self.users = dict(users)
        self.lifetime = lifetime
        self.members = members
        self.member_hits: Counter[str] = Counter()
        self.logins = 0
        self.sessions: dict[str, tuple[str, float]] = {}  # cookie -> (user, expires)
        self.qr_tokens: dict[str, bool] = {}  # token -> scanned
        self._lock = threading.Lock()
        super().__init__(self._handler_class())

    def _new_session(self, user: str) -> str:
        with self._lock:
            self.logins += 1
            cookie = secrets.token_hex(16)
            self.sessions[cookie] = (user, time.time() + self.lifetime)
        return cookie

    def user_of(self, cookie: str | None) -> str | None:
        with self._lock:
            entry = self.sessions.get(cookie or "")
        return entry[0] if entry is not None and entry[1] > time.time() else None

    def expire_all(self) -> None:
        with self._lock:
            self.sessions.clear()

    def request(
        self, method: str, path: str, form: dict[str, str] | None = None, cookie: str = ""
    ) -> tuple[int, str, str]:
        """(status, body, value of the ``session`` cookie set or "") without following redirects."""
        host, port = self._server.server_address[:2]
        connection = http.client.HTTPConnection(str(host), int(port), timeout=5)
        body = urlencode(form or {})
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if cookie:
            headers["Cookie"] = f"session={cookie}"
        try:
            connection.request(method, path, body=body, headers=headers)
            answer = connection.getresponse()
            jar = SimpleCookie(answer.getheader("Set-Cookie") or "")
            text = answer.read().decode()
        finally:
            connection.close()
        return answer.status, text, jar["session"].value if "session" in jar else ""

    def scan(self, token: str) -> None:
        self.request("POST", f"/qr/{token}/scan")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(QuietHandler):
            def _answer(
                self, status: int, body: bytes = b"", headers: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _user(self) -> str | None:
                jar = SimpleCookie(self.headers.get("Cookie", ""))
                return site.user_of(jar["session"].value if "session" in jar else None)

            def _member_page(self) -> None:
                number = self.path.removeprefix("/members/")
                if not number.isdigit() or int(number) >= site.members:
                    self._answer(404)
                    return
                if self._user() is None:
                    self._answer(401, b"login")
                    return
                with site._lock:
                    site.member_hits[self.path] += 1
                n = int(number)
                links = "".join(
                    f"<a href='/members/{c}'>member {c}</a>"
                    for c in (2 * n + 1, 2 * n + 2)
                    if c < site.members
                )
                self._answer(200, f"<html><title>member {n}</title>{links}</html>".encode())

            def _set_cookie(self, cookie: str) -> dict[str, str]:
                return {"Set-Cookie": f"session={cookie}; HttpOnly; Path=/"}

            def do_GET(self) -> None:
                if self.path == "/login":
                    self._answer(200, LOGIN_FORM)
                elif self.path == "/me":
                    user = self._user()
                    self._answer(401, b"login") if user is None else self._answer(
                        200, user.encode()
                    )
                elif self.path.startswith("/members/"):
                    self._member_page()
                elif self.path == "/qr":
                    token = secrets.token_hex(8)
                    with site._lock:
                        site.qr_tokens[token] = False
                    link = f"{site.base_url}/qr/{token}"
                    page = QR_PAGE.format(
                        uri=segno.make(link).png_data_uri(scale=4), link=link, token=token
                    )
                    self._answer(200, page.encode())
                elif self.path.startswith("/qr/") and self.path.endswith("/status"):
                    token = self.path.split("/")[2]
                    with site._lock:
                        scanned = site.qr_tokens.get(token, False)
                        if scanned:
                            site.qr_tokens[token] = False  # one cookie per scan
                    if scanned:
                        self._answer(200, b"ok", self._set_cookie(site._new_session("qr-user")))
                    else:
                        self._answer(202, b"waiting")
                else:
                    self._answer(404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                if self.path == "/login":
                    user = form.get("username", [""])[0]
                    password = form.get("password", [""])[0]
                    if user in site.users and site.users[user] == password:
                        cookie = site._new_session(user)
                        self._answer(302, b"", {"Location": "/me", **self._set_cookie(cookie)})
                    else:
                        self._answer(403, b"wrong user or password")
                elif self.path.startswith("/qr/") and self.path.endswith("/scan"):
                    with site._lock:
                        site.qr_tokens[self.path.split("/")[2]] = True
                    self._answer(200, b"scanned")
                else:
                    self._answer(404)

        return Handler
