"""The ``__zse_ck`` challenge: a page whose script a browser must run, and the server's check.

The page carries a nonce (``<meta id="zh-zse-ck" content="001_<nonce>">``); its inline script
hashes ``<nonce>+<d_c0 cookie>`` (FNV-1a, 32 bits, over UTF-16 code units as JavaScript's
``charCodeAt`` sees them), sets ``__zse_ck=001_<nonce>_<hash hex>`` and reloads. The server
accepts a ``__zse_ck`` only for a nonce it issued, with the hash of the request's own ``d_c0``,
and for ``lifetime`` seconds after the first request it accepted (``None``: for good).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable

from tests.zhihu_mock.counters import MockCounters

COOKIE = "__zse_ck"
VERSION = "001"
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193

_SCRIPT = """(function () {
  var nonce = document.getElementById("zh-zse-ck").getAttribute("content").slice(4);
  var found = document.cookie.match(/(?:^|;\\s*)d_c0=([^;]*)/);
  var text = nonce + "+" + (found ? found[1] : "");
  var h = 0x811c9dc5;
  for (var i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  }
  var value = "001_" + nonce + "_" + ("0000000" + h.toString(16)).slice(-8);
  document.cookie = "__zse_ck=" + value + "; path=/";
  location.reload();
})();"""


def zse_ck_hash(nonce: str, d_c0: str) -> str:
    """What the page's script computes (the server's side of the check)."""
    text = f"{nonce}+{d_c0}".encode("utf-16-le")
    value = _FNV_OFFSET
    for i in range(0, len(text), 2):
        value = ((value ^ int.from_bytes(text[i : i + 2], "little")) * _FNV_PRIME) & 0xFFFFFFFF
    return f"{value:08x}"


def challenge_page(nonce: str) -> str:
    return f"""<!doctype html><html><head><meta charset="utf-8">
<meta id="zh-zse-ck" content="{VERSION}_{nonce}">
<title>知乎 - 安全验证</title></head><body><div id="root">安全验证中…</div>
<script>{_SCRIPT}</script></body></html>"""


class ZseCk:
    """Nonces handed out in challenge pages and the ``__zse_ck`` values accepted so far."""

    def __init__(
        self, lifetime: float | None, clock: Callable[[], float], counters: MockCounters
    ) -> None:
        self.lifetime = lifetime
        self.clock = clock
        self.counters = counters
        self._lock = threading.Lock()
        self._issued: set[str] = set()
        self._solved: dict[str, float] = {}  # cookie value -> first accepted at

    def page(self) -> str:
        """A challenge page with a fresh nonce."""
        nonce = secrets.token_hex(16)
        with self._lock:
            self._issued.add(nonce)
        return challenge_page(nonce)

    def accepts(self, value: str, d_c0: str) -> bool:
        """Whether a request with these cookies passes; the first pass counts a solve."""
        version, _, rest = value.partition("_")
        nonce, _, digest = rest.partition("_")
        if version != VERSION or digest != zse_ck_hash(nonce, d_c0):
            return False
        now = self.clock()
        with self._lock:
            if nonce not in self._issued:
                return False
            first = value not in self._solved
            solved = self._solved.setdefault(value, now)
        if first:
            self.counters.count_solved_challenge()
        return self.lifetime is None or now < solved + self.lifetime
