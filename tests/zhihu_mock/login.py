"""Accounts, ``z_c0`` sessions, and the two login flows: a password form and a QR code."""

from __future__ import annotations

import hashlib
import html
import secrets
import threading
from dataclasses import dataclass
from typing import Any, Literal

import segno

from tests.zhihu_mock.config import MockConfig
from tests.zhihu_mock.counters import MockCounters
from tests.zhihu_mock.messages import (
    Request,
    Response,
    error_response,
    html_response,
    json_response,
    not_found,
)

SessionState = Literal["ok", "missing", "expired"]
COOKIE_MAX_AGE = 90 * 86_400  # the browser keeps z_c0; the server decides when it expires


@dataclass
class _QrToken:
    created: float
    scanned_by: str | None = None
    z_c0: str | None = None  # issued at the first scan_info poll after the scan


def account_json(username: str, base_url: str) -> dict[str, Any]:
    """``/api/v4/me`` of a configured account: a stable persona derived from its name."""
    digest = hashlib.md5(username.encode()).hexdigest()
    return {
        "id": digest,
        "uid": str(int(digest[:15], 16)),
        "url_token": username,
        "name": username,
        "headline": "",
        "gender": -1,
        "avatar_url": "https://picx.zhimg.com/v2-abed1a8c04700ba7d72b45195223e0ff_l.jpg",
        "type": "people",
        "user_type": "people",
        "url": f"{base_url}/api/v4/people/{digest}",
        "is_org": False,
        "is_advertiser": False,
        "badge": [],
        "badge_v2": None,
        "vip_info": {"is_vip": False},
    }


class Sessions:
    """The ``z_c0`` tokens issued so far and the pending QR tokens."""

    def __init__(self, config: MockConfig, counters: MockCounters) -> None:
        self.config = config
        self.counters = counters
        self._lock = threading.RLock()
        self._sessions: dict[str, tuple[str, float]] = {}  # z_c0 -> (username, issued at)
        self._qr: dict[str, _QrToken] = {}

    def issue(self, username: str) -> str:
        """A new ``z_c0`` for an account, without counting a login (for test setup)."""
        if username not in self.config.accounts:
            raise KeyError(f"no account {username!r} in MockConfig.accounts")
        now = self.config.clock()
        secret = secrets.token_urlsafe(48)
        token = f"2|1:0|10:{int(now)}|4:z_c0|{len(secret)}:{secret}|{secrets.token_hex(32)}"
        with self._lock:
            self._sessions[token] = (username, now)
        return token

    def login(self, username: str) -> str:
        self.counters.count_login(username)
        return self.issue(username)

    def state(self, z_c0: str | None) -> SessionState:
        with self._lock:
            session = self._sessions.get(z_c0 or "")
        if session is None:
            return "missing"
        lifetime = self.config.session_lifetime
        if lifetime is not None and self.config.clock() - session[1] > lifetime:
            return "expired"
        return "ok"

    def account(self, z_c0: str | None) -> str | None:
        """The account of a valid session."""
        if self.state(z_c0) != "ok":
            return None
        with self._lock:
            return self._sessions[z_c0 or ""][0]

    # Password form -------------------------------------------------------------------------

    def sign_in(self, request: Request) -> Response:
        """``POST /api/v3/oauth/sign_in``: a form post redirects, a JSON post answers JSON."""
        form = request.form()
        username, password = form.get("username", ""), form.get("password", "")
        as_json = request.headers.get("content-type", "").startswith("application/json")
        if self.config.accounts.get(username) != password or not username:
            if as_json:
                return error_response(401, 100005, "帐号或密码错误", "ERR_LOGIN_FAILED")
            return html_response(signin_page("帐号或密码错误"), 401)
        z_c0 = self.login(username)
        if as_json:
            me = account_json(username, request.base_url)
            response = json_response({"user_id": me["uid"], "uid": me["uid"], "login": True})
        else:
            response = Response(302, b"", "text/html; charset=utf-8", [("Location", "/")])
        return response.set_cookie("z_c0", z_c0, COOKIE_MAX_AGE)

    # QR code -------------------------------------------------------------------------------

    def qr_create(self, request: Request) -> Response:
        token = secrets.token_hex(16)
        now = self.config.clock()
        with self._lock:
            self._qr[token] = _QrToken(created=now)
        return json_response(
            {
                "token": token,
                "link": f"{request.base_url}/account/scan/login/{token}?/api/login/qrcode",
                "expires_at": int(now + self.config.qr_lifetime),
            }
        )

    def qr_image(self, request: Request, token: str) -> Response:
        with self._lock:
            known = token in self._qr
        if not known:
            return not_found()
        link = f"{request.base_url}/account/scan/login/{token}"
        svg = segno.make(link, error="m").svg_inline(scale=4)
        return Response(200, svg.encode(), "image/svg+xml")

    def qr_scan_info(self, request: Request, token: str) -> Response:
        """Polled by the page: status 0 until scanned, then 1 with a ``z_c0`` cookie."""
        del request
        with self._lock:  # re-entrant: the first poll after the scan logs in exactly once
            qr = self._qr.get(token)
            if qr is None:
                return not_found()
            if qr.scanned_by is None:
                if self.config.clock() - qr.created > self.config.qr_lifetime:
                    return json_response({"status": 5, "message": "二维码已失效，请刷新"})
                return json_response({"status": 0})
            if qr.z_c0 is None:
                qr.z_c0 = self.login(qr.scanned_by)
            uid = account_json(qr.scanned_by, "")["uid"]
            z_c0 = qr.z_c0
        response = json_response({"status": 1, "user_id": uid, "uid": uid, "login_type": "qrcode"})
        return response.set_cookie("z_c0", z_c0, COOKIE_MAX_AGE)

    def qr_scan(self, request: Request, token: str) -> Response:
        """Test-only ``POST /__mock__/qr/{token}/scan``: the phone app scans the code."""
        username = request.query.get("username") or next(iter(self.config.accounts), "")
        if username not in self.config.accounts:
            return error_response(400, 400, f"no account {username!r}")
        with self._lock:
            qr = self._qr.get(token)
            if qr is None:
                return not_found()
            qr.scanned_by = username
        return json_response({"ok": True, "username": username})


def signin_page(error: str = "") -> str:
    message = (
        f'<div class="SignFlow-error" role="alert">{html.escape(error)}</div>' if error else ""
    )
    return f"""<!doctype html><html lang="zh"><head><meta charset="utf-8"><title>知乎 - 登录</title>
</head><body><main class="SignContainer">{message}
<form class="SignFlow" method="post" action="/api/v3/oauth/sign_in">
<input name="username" type="text" placeholder="手机号或邮箱" autocomplete="username">
<input name="password" type="password" placeholder="密码" autocomplete="current-password">
<button class="SignFlow-submitButton" type="submit">登录</button></form>
<a href="/signin?qr=1">扫码登录</a></main></body></html>"""


def qr_signin_page() -> str:
    """Asks for a token, shows its QR code and polls ``scan_info`` until the scan."""
    return """<!doctype html><html lang="zh"><head><meta charset="utf-8">
<title>知乎 - 扫码登录</title></head><body><main class="SignQr"><div class="Qrcode-container">
<canvas class="Qrcode-canvas" width="150" height="150"></canvas>
<img class="Qrcode-img" alt="二维码" src=""></div><p class="Qrcode-status">打开知乎 App 扫一扫</p>
<script>
(async () => {
  const created = await (await fetch("/api/v3/account/api/login/qrcode", {method: "POST"})).json();
  const img = document.querySelector(".Qrcode-img");
  img.src = `/api/v3/account/api/login/qrcode/${created.token}/image`;
  img.dataset.token = created.token;
  const canvas = document.querySelector(".Qrcode-canvas");
  canvas.dataset.token = created.token;
  img.onload = () => canvas.getContext("2d").drawImage(img, 0, 0, 150, 150);
  const poll = async () => {
    const url = `/api/v3/account/api/login/qrcode/${created.token}/scan_info`;
    const info = await (await fetch(url)).json();
    if (info.status === 1) { location.href = "/"; return; }
    if (info.status === 0) { setTimeout(poll, 500); return; }
    document.querySelector(".Qrcode-status").textContent = info.message;
  };
  poll();
})();
</script></main></body></html>"""
