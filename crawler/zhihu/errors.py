"""What an API answer says went wrong: ``{"error": {"code", "message"}}`` or a challenge page."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import orjson

CHALLENGE_MARK = b'id="zh-zse-ck"'


class Problem(StrEnum):
    SIGNATURE = "signer_error"  # 10003 (HTTP 403): bad signature or no d_c0
    LOGIN = "login_required"  # 100 / 101: no or expired z_c0
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


def classify(status: int, body: bytes) -> ApiError | None:
    """``None`` for a successful JSON answer."""
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


def _by_status(status: int) -> Problem:
    return Problem.NOT_FOUND if status == 404 else Problem.OTHER
