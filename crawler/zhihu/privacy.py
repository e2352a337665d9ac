"""Privacy of people in items (``ZHIHU_PRIVACY``, on by default).

On: author ids become HMAC-SHA256(``ZHIHU_PRIVACY_KEY``, id) in hex, so one person keeps one
pseudonym across items and crawls with the same key, names keep their first character
followed by ``*`` and avatar URLs are left out (``""``). ``url_token`` stays: it is the public
handle creator items are keyed by.

Without ``ZHIHU_PRIVACY_KEY``, the nodes of a cluster share a random key created once in
Redis (``PRIVACY_KEY_KEY``, never purged); a standalone run uses a random key of its own
(pseudonyms then differ between runs).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from crawler.redis_connection import sync_client
from crawler.zhihu.items import Author

PRIVACY_KEY_KEY = "{zhihu}:privacy_key"


def shared_privacy_key(redis_url: str) -> bytes:
    """The cluster's pseudonym key: created by the first node, read by all the others."""
    fresh = secrets.token_hex(32)
    if not redis_url:
        return fresh.encode()
    client = sync_client(redis_url)
    try:
        client.set(PRIVACY_KEY_KEY, fresh, nx=True)
        stored = client.get(PRIVACY_KEY_KEY)
    finally:
        client.close()
    return stored.encode() if isinstance(stored, str) else stored or fresh.encode()


@dataclass(frozen=True, slots=True)
class Privacy:
    enabled: bool
    key: bytes

    def author_id(self, value: str) -> str:
        if not self.enabled or not value:
            return value
        return hmac.new(self.key, value.encode(), hashlib.sha256).hexdigest()

    def name(self, value: str) -> str:
        return value[:1] + "*" if self.enabled and value else value

    def avatar(self, url: str) -> str:
        return "" if self.enabled else url

    def author(self, author: Author) -> Author:
        return Author(
            id=self.author_id(author["id"]),
            url_token=author["url_token"],
            name=self.name(author["name"]),
            link=author["link"],
            avatar_url=self.avatar(author["avatar_url"]),
        )
