"""What an answer says went wrong: ``{"error": {"code", "message"}}``, a challenge page, or a
redirect to the sign-in or soft-block page (any other redirect is no error: it is followed)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

import orjson

CHALLENGE_MARK = b'id="zh-zse-ck"'
# in the path of a redirect's Location (its query may say need_login=false)
SIGN_IN_MARKS = (b"signin", b"sign_in", b"login")
SOFT_BLOCK_MARKS = (b"/account/unhappy", b"captcha")


class Problem(StrEnum):
    SIGNATURE = "signer_error"  # 10003 (HTTP 403): bad signature or no d_c0
    LOGIN = "login_required"  # 100 / 101, a bare 401, a redirect to sign in: no or expired z_c0
    BLOCKED = "blocked"  # a redirect to /account/unhappy (a captcha): the client is flagged
    RATE_LIMITED = "rate_limited"  # 40362: request anomaly, access temporarily limited
    CHALLENGE = "challenge"  # __zse_ck HTML page instead of JSON
    NOT_FOUND = "not_found"  # 404
    OTHER = "other_error"  # any other error answer


@dataclass(frozen=True, slots=True)
class ApiError:
    problem: Problem
    code: int  # the error code, or the HTTP status when the body has none
    message: str


_BY_CODE = {
    10003: Problem.SIGNATURE,
    100: Problem.LOGIN,
    101: Problem.LOGIN,
    40362: Problem.RATE_LIMITED,
    404: Problem.NOT_FOUND,
}


def classify(status: int, body: bytes, location: bytes = b"") -> ApiError | None:
    """``None`` for a successful JSON answer or an ordinary redirect (``location``: the
    ``Location`` header)."""
    if 300 <= status < 400:
        return _redirect(status, urlsplit(location.lower()).path)
    if CHALLENGE_MARK in body[:4096]:
        return ApiError(Problem.CHALLENGE, status, "__zse_ck challenge page")
    error = None
    if body[:1] == b"{" and b'"error"' in body[:200]:
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            payload = None
        error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return None if status < 400 else ApiError(_by_status(status), status, f"HTTP {status}")
    code = error.get("code")
    code = code if isinstance(code, int) else status
    problem = _BY_CODE.get(code) or _by_status(status)
    return ApiError(problem, code, str(error.get("message") or ""))


def _redirect(status: int, path: bytes) -> ApiError | None:
    if any(mark in path for mark in SIGN_IN_MARKS):
        return ApiError(Problem.LOGIN, status, "redirected to sign in")
    if any(mark in path for mark in SOFT_BLOCK_MARKS):
        return ApiError(Problem.BLOCKED, status, "redirected to the soft-block page")
    return None


def _by_status(status: int) -> Problem:
    return {401: Problem.LOGIN, 404: Problem.NOT_FOUND}.get(status, Problem.OTHER)
