"""Configuration of the Zhihu mock: what data to generate and which anti-bot rules to enforce."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tests.zhihu_mock.variety import Variety

if TYPE_CHECKING:
    from tests.zhihu_mock.messages import Request

# path_with_query (no host, exactly as sent), d_c0 cookie value, x-zse-96 header value -> accepted?
SignatureVerifier = Callable[[str, str, str], bool]

SIGNATURE_VERSION = "101_3_3.0"
_SIGNATURE_FORMAT = re.compile(r"^2\.0_[A-Za-z0-9+/=]{64}$")


def signature_format_ok(path_with_query: str, d_c0: str, value: str) -> bool:
    """The default verifier: the real output is not deterministic, so only its format is checked."""
    del path_with_query, d_c0
    return _SIGNATURE_FORMAT.fullmatch(value) is not None


@dataclass(frozen=True)
class QuestionSpec:
    """One generated question: how many answers, and how many comments (root + child) in total."""

    answers: int
    comments: int = 0

    def __post_init__(self) -> None:
        if self.answers < 0 or self.comments < 0:
            raise ValueError(f"QuestionSpec({self.answers}, {self.comments}) must not be negative")


@dataclass(frozen=True)
class DataConfig:
    """What :func:`tests.zhihu_mock.data.generate` builds; the same config gives the same data."""

    seed: int = 1
    questions: tuple[QuestionSpec, ...] = (
        QuestionSpec(500, 5000),
        QuestionSpec(12, 60),
        QuestionSpec(3, 0),
    )
    people: int = 30
    articles: int = 20
    article_comments: int = 120  # spread over the articles; some get none
    zvideos: int = 6
    zvideo_comments: int = 30
    search_keywords: tuple[str, ...] = ("Python", "机器学习", "咖啡")
    # share of answers whose author is anonymous (author id "0", url_token "")
    anonymous_share: float = 0.03

    def __post_init__(self) -> None:
        if self.people < 1:
            raise ValueError(f"DataConfig.people={self.people} must be >= 1")
        for name in ("articles", "article_comments", "zvideos", "zvideo_comments"):
            if getattr(self, name) < 0:
                raise ValueError(f"DataConfig.{name}={getattr(self, name)} must be >= 0")
        if not 0.0 <= self.anonymous_share < 1.0:
            raise ValueError(f"DataConfig.anonymous_share={self.anonymous_share} must be in [0, 1)")


@dataclass
class MockConfig:
    """Everything a :class:`~tests.zhihu_mock.server.ZhihuMock` serves and enforces.

    Each enforcement is switchable; ``None`` disables a limit.
    """

    data: DataConfig = field(default_factory=DataConfig)
    # the shape variety of real Zhihu (previews left out, withheld items, drift); all off
    variety: Variety = field(default_factory=Variety)
    host: str = "127.0.0.1"
    port: int = 0
    # absolute URLs in responses (paging.next, object urls) start with this; default: the
    # request's Host header, else the bound address
    public_base_url: str | None = None
    # API v4: a d_c0 cookie, x-zse-93 == SIGNATURE_VERSION and an x-zse-96 the verifier accepts
    require_d_c0: bool = True
    require_signature: bool = True
    verify_signature: SignatureVerifier = signature_format_ok
    # logged-in endpoints need a z_c0 issued by a login; None: sessions never expire
    require_login: bool = True
    session_lifetime: float | None = None
    # how a missing or expired z_c0 is refused: "json" (401, code 100/101), "redirect" (302 to
    # /signin?next=<path>, as pages are), "html" (a bare 401 page, no code)
    login_refusal: str = "json"
    # API requests per second (sliding one-second window) above which 40362 is answered
    rate_limit: int | None = None
    # the HTTP status of that 40362 answer (real Zhihu: 403; some gateways answer 429)
    rate_limit_status: int = 403
    # regular expressions searched in an API path+query: matching calls are answered with the
    # __zse_ck challenge page instead of JSON until they carry a valid __zse_ck cookie
    challenge_paths: tuple[str, ...] = ()
    # seconds a solved __zse_ck stays valid after the first request it let through; None: for good
    zse_ck_lifetime: float | None = None
    # challenge pages each pattern answers before it lets unsolved calls through; None: never
    challenge_limit: int | None = None
    # regular expressions searched in an API path+query: the first soft_block_limit matching
    # calls are answered with a 302 to /account/unhappy (the soft block of a flagged client)
    soft_block_paths: tuple[str, ...] = ()
    soft_block_limit: int = 1
    # /answer/{aid} answers a 301 to /question/{qid}/answer/{aid} (www.zhihu.com does)
    answer_redirect: bool = False
    accounts: Mapping[str, str] = field(default_factory=lambda: {"tester": "secret-密码-1"})
    qr_lifetime: float = 120.0
    clock: Callable[[], float] = time.time
    # test hook: called with every request before it is answered (from the server's threads)
    before_answer: Callable[[Request], None] | None = None

    def __post_init__(self) -> None:
        if self.rate_limit is not None and self.rate_limit < 1:
            raise ValueError(f"MockConfig.rate_limit={self.rate_limit} must be >= 1 or None")
        if self.rate_limit_status not in (403, 429):
            raise ValueError(
                f"MockConfig.rate_limit_status={self.rate_limit_status} must be 403 or 429"
            )
        if self.session_lifetime is not None and self.session_lifetime <= 0:
            raise ValueError(
                f"MockConfig.session_lifetime={self.session_lifetime} must be > 0 or None"
            )
        if self.zse_ck_lifetime is not None and self.zse_ck_lifetime <= 0:
            raise ValueError(
                f"MockConfig.zse_ck_lifetime={self.zse_ck_lifetime} must be > 0 or None"
            )
        if self.challenge_limit is not None and self.challenge_limit < 1:
            raise ValueError(
                f"MockConfig.challenge_limit={self.challenge_limit} must be >= 1 or None"
            )
        if self.login_refusal not in ("json", "redirect", "html"):
            raise ValueError(
                f"MockConfig.login_refusal={self.login_refusal!r} must be json, redirect or html"
            )
        if self.soft_block_limit < 1:
            raise ValueError(f"MockConfig.soft_block_limit={self.soft_block_limit} must be >= 1")
        for pattern in (*self.challenge_paths, *self.soft_block_paths):
            re.compile(pattern)
