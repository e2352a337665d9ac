"""Optional encryption at rest of the cookie payload (Fernet, key from ``CRAWLER_SESSION_KEY``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from cryptography.fernet import Fernet, InvalidToken

from crawler.sessions.models import SessionError

KEY_ENV = "CRAWLER_SESSION_KEY"
PLAIN = "plain"
FERNET = "fernet"


class SessionKeyError(SessionError):
    """The encryption key is missing, malformed or not the one the session was sealed with."""


class CookieCipher:
    """Seals cookie payloads with Fernet when a key is given, else stores them as plain JSON."""

    def __init__(self, key: str | bytes | None) -> None:
        self._fernet: Fernet | None = None
        if key:
            try:
                self._fernet = Fernet(key)
            except (ValueError, TypeError):
                # Never echo the key: name the variable and what it must be.
                raise SessionKeyError(
                    f"{KEY_ENV} is not a Fernet key (32 url-safe base64-encoded bytes; "
                    "make one with: python -c 'from cryptography.fernet import Fernet; "
                    "print(Fernet.generate_key().decode())')"
                ) from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CookieCipher:
        return cls((os.environ if environ is None else environ).get(KEY_ENV, "").strip() or None)

    @property
    def encrypts(self) -> bool:
        return self._fernet is not None

    def seal(self, payload: bytes) -> tuple[bytes, str]:
        """(stored bytes, encoding name)."""
        if self._fernet is None:
            return payload, PLAIN
        return self._fernet.encrypt(payload), FERNET

    def open(self, stored: bytes, encoding: str, where: str) -> bytes:
        if encoding == PLAIN:
            return stored
        if encoding != FERNET:
            raise SessionKeyError(f"cookies of {where} use an unknown encoding {encoding!r}")
        if self._fernet is None:
            raise SessionKeyError(f"cookies of {where} are encrypted: set {KEY_ENV}")
        try:
            return self._fernet.decrypt(stored)
        except InvalidToken:
            raise SessionKeyError(
                f"{KEY_ENV} does not decrypt the cookies of {where} (wrong key?)"
            ) from None
