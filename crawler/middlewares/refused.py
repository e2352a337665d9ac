"""``RefusedRequest``: a request a component refused on purpose, with the reason to record."""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest


class RefusedRequest(IgnoreRequest):
    """Raised instead of a bare ``IgnoreRequest``; ``reason`` (``component/event``) is the
    stat and, in cluster mode, the failure reason of the request's lease."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def failure_reason(exception: BaseException | None) -> str:
    """The failure reason of a request whose download ended with ``exception``."""
    if isinstance(exception, RefusedRequest):
        return exception.reason
    return f"download/{type(exception).__name__}"
