"""Redis key names of the session layer (see ``docs/sessions.md``).

Every key of a platform carries the hash tag ``{<platform>}`` so the Lua
scripts, which build session keys from the account names they read, only ever
touch one Redis Cluster slot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PLATFORM = re.compile(r"[A-Za-z0-9._-]{1,64}")
_ACCOUNT_FORBIDDEN = re.compile(r"[{}\s]")


def check_names(platform: str, account: str | None = None) -> None:
    """Reject names that would break the key layout (braces end the hash tag)."""
    if not _PLATFORM.fullmatch(platform):
        raise ValueError(f"platform={platform!r} must be 1-64 of A-Z a-z 0-9 . _ -")
    if account is not None and (
        not account or len(account) > 256 or _ACCOUNT_FORBIDDEN.search(account)
    ):
        raise ValueError(
            f"account={account!r} must be 1-256 characters without braces or whitespace"
        )


@dataclass(frozen=True, slots=True)
class SessionKeys:
    platform: str
    prefix: str = "sessions"

    def __post_init__(self) -> None:
        check_names(self.platform)

    @property
    def base(self) -> str:
        return f"{self.prefix}:{{{self.platform}}}"

    @property
    def session_prefix(self) -> str:
        """A session key is this plus the account name."""
        return f"{self.base}:session:"

    def session(self, account: str) -> str:
        check_names(self.platform, account)
        return self.session_prefix + account

    @property
    def accounts(self) -> str:
        return f"{self.base}:accounts"

    def login(self, account: str) -> str:
        check_names(self.platform, account)
        return f"{self.base}:login:{account}"
