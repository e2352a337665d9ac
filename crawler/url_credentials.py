"""Mask the credentials of URLs before they reach a log line or a stored record (pure functions).

``mask_secrets`` masks every URL inside a text: a URL alone, a log message, an
exception's message, a request's ``repr`` such as ``<GET http://user:pw@host/>``.
What is masked:

- the password of the user information: ``http://user:pw@host/`` becomes
  ``http://user:***@host/``; user information without a password (often a
  token: ``https://ghp_x@host/``) becomes ``***@``;
- a bare ``user:pw@host`` outside a URL (Twisted's ``invalid hostname: user:pw@host``)
  becomes ``user:***@host``;
- the values of query parameters that usually hold secrets (``SECRET_QUERY_PARAMS``,
  case-insensitive): ``?token=abc&page=2`` becomes ``?token=***&page=2``.

Everything else is kept byte for byte (no re-encoding), so a masked URL still
says which page it was.
"""

from __future__ import annotations

import re

MASK = "***"

SECRET_QUERY_PARAMS = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "auth",
        "client_secret",
        "password",
        "passwd",
        "pwd",
        "secret",
        "session_token",
        "sig",
        "signature",
        "token",
    }
)

# scheme "://" authority: the authority ends at the first "/", "?", "#", white space or a
# character that closes a URL quoted in text (<GET http://...>, 'http://...').
_AUTHORITY = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<authority>[^/?#\s<>\"'`]*)")
# user:password@ where it starts a word (after white space, a quote, a bracket or "=").
_BARE_USERINFO = re.compile(r"(?<![^\s'\"(<\[=,])(?P<user>[^\s:/@<>\"'`]+):[^\s@/<>\"'`]*@")
_SECRET_PARAM = re.compile(
    r"(?P<lead>[?&;](?:" + "|".join(sorted(SECRET_QUERY_PARAMS)) + r")=)(?P<value>[^&#;\s<>\"'`]+)",
    re.IGNORECASE,
)


def _mask_authority(authority: str) -> str:
    userinfo, at, host = authority.rpartition("@")
    if not at:
        return authority
    user, colon, _password = userinfo.partition(":")
    return f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"


def _mask_match(match: re.Match[str]) -> str:
    return match["scheme"] + _mask_authority(match["authority"])


def mask_secrets(text: str) -> str:
    """``text`` (a URL or any text holding URLs) with the credentials of its URLs masked."""
    if "@" in text:
        text = _AUTHORITY.sub(_mask_match, text)
        text = _BARE_USERINFO.sub(lambda match: f"{match['user']}:{MASK}@", text)
    if "=" in text:
        text = _SECRET_PARAM.sub(lambda match: match["lead"] + MASK, text)
    return text
