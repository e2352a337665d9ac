"""Settings of the zhihu spider, read once and validated (errors name the setting and value)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from crawler.settings_values import (
    ListSettings,
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_typed_list,
    text,
)
from crawler.zhihu.urls import DEFAULT_ENDPOINTS, Endpoints

SORTS = frozenset({"default", "created", "updated"})
COMMENT_ORDERS = frozenset({"score", "ts"})
DEFAULT_USER_AGENT = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
    "(KHTML, like Gecko) Chrome/138.0.0.0 Safari/537.36"
)


class SettingsLike(ListSettings, Protocol):
    """The part of Scrapy's ``BaseSettings`` read here."""

    def get(self, name: str, default: Any = None) -> Any: ...
    def getbool(self, name: str, default: bool = False) -> bool: ...
    def getint(self, name: str, default: int = 0) -> int: ...
    def getfloat(self, name: str, default: float = 0.0) -> float: ...
    def getdict(self, name: str, default: dict[Any, Any] | None = None) -> dict[Any, Any]: ...


def _base_url(name: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc or parts.query:
        raise ValueError(f"{name}={value!r} must be an http(s) URL without a query")
    return value.rstrip("/")


@dataclass(frozen=True, slots=True)
class ZhihuSettings:
    www_url: str  # ZHIHU_WWW_URL
    zhuanlan_url: str  # ZHIHU_ZHUANLAN_URL
    api_url: str  # ZHIHU_API_URL
    seed_hosts: frozenset[str]  # ZHIHU_SEED_HOSTS (+ the hosts of the three base URLs)
    endpoints: Endpoints  # ZHIHU_ENDPOINTS over DEFAULT_ENDPOINTS
    signer: str  # ZHIHU_SIGNER: import path of a Signer class
    api_version: str  # ZHIHU_API_VERSION
    user_agent: str  # ZHIHU_USER_AGENT
    comments: bool  # ZHIHU_COMMENTS
    creators: bool  # ZHIHU_CREATORS
    creator_content: bool  # ZHIHU_CREATOR_CONTENT
    max_answers: int  # ZHIHU_MAX_ANSWERS, 0 = no limit
    max_comments: int  # ZHIHU_MAX_COMMENTS, 0 = no limit
    page_size: int  # ZHIHU_PAGE_SIZE
    comment_page_size: int  # ZHIHU_COMMENT_PAGE_SIZE
    answer_sort: str  # ZHIHU_ANSWER_SORT
    comment_order: str  # ZHIHU_COMMENT_ORDER
    max_retries: int  # ZHIHU_MAX_RETRIES: re-enqueues after a challenge or 40362
    sessions: bool  # ZHIHU_SESSIONS
    accounts: tuple[str, ...]  # ZHIHU_ACCOUNTS
    password_env: str  # ZHIHU_PASSWORD_ENV
    privacy: bool  # ZHIHU_PRIVACY
    privacy_key: str  # ZHIHU_PRIVACY_KEY
    challenge_browser: bool  # ZHIHU_CHALLENGE_BROWSER: solve __zse_ck pages in Chromium
    challenge_timeout: float  # ZHIHU_CHALLENGE_TIMEOUT: seconds for one solve
    browser_executable: str  # BROWSER_EXECUTABLE: the Chromium that solves them

    @classmethod
    def from_settings(cls, settings: SettingsLike) -> ZhihuSettings:
        www = _base_url("ZHIHU_WWW_URL", str(settings.get("ZHIHU_WWW_URL") or ""))
        zhuanlan = _base_url("ZHIHU_ZHUANLAN_URL", str(settings.get("ZHIHU_ZHUANLAN_URL") or ""))
        api = _base_url("ZHIHU_API_URL", str(settings.get("ZHIHU_API_URL") or ""))
        overrides: Mapping[str, Any] = get_dict(settings, "ZHIHU_ENDPOINTS")
        hosts = {h.lower() for h in get_typed_list(settings, "ZHIHU_SEED_HOSTS", text, "hosts")}
        hosts |= {urlsplit(url).netloc.lower() for url in (www, zhuanlan, api)}
        values = cls(
            www_url=www,
            zhuanlan_url=zhuanlan,
            api_url=api,
            seed_hosts=frozenset(hosts),
            endpoints=Endpoints.build({**DEFAULT_ENDPOINTS, **overrides}, www, zhuanlan, api),
            signer=str(settings.get("ZHIHU_SIGNER") or ""),
            api_version=str(settings.get("ZHIHU_API_VERSION") or ""),
            user_agent=str(settings.get("ZHIHU_USER_AGENT") or DEFAULT_USER_AGENT),
            comments=get_bool(settings, "ZHIHU_COMMENTS", True),
            creators=get_bool(settings, "ZHIHU_CREATORS", True),
            creator_content=get_bool(settings, "ZHIHU_CREATOR_CONTENT", True),
            max_answers=get_int(settings, "ZHIHU_MAX_ANSWERS", 0),
            max_comments=get_int(settings, "ZHIHU_MAX_COMMENTS", 0),
            page_size=get_int(settings, "ZHIHU_PAGE_SIZE", 20),
            comment_page_size=get_int(settings, "ZHIHU_COMMENT_PAGE_SIZE", 20),
            answer_sort=str(settings.get("ZHIHU_ANSWER_SORT") or "default"),
            comment_order=str(settings.get("ZHIHU_COMMENT_ORDER") or "score"),
            max_retries=get_int(settings, "ZHIHU_MAX_RETRIES", 5),
            sessions=get_bool(settings, "ZHIHU_SESSIONS", True),
            accounts=tuple(get_typed_list(settings, "ZHIHU_ACCOUNTS", text, "account names")),
            password_env=str(settings.get("ZHIHU_PASSWORD_ENV") or ""),
            privacy=get_bool(settings, "ZHIHU_PRIVACY", True),
            privacy_key=str(settings.get("ZHIHU_PRIVACY_KEY") or ""),
            challenge_browser=get_bool(settings, "ZHIHU_CHALLENGE_BROWSER", False),
            challenge_timeout=get_float(settings, "ZHIHU_CHALLENGE_TIMEOUT", 30.0),
            browser_executable=str(settings.get("BROWSER_EXECUTABLE") or ""),
        )
        values.validate()
        return values

    def validate(self) -> None:
        for name, value, low in (
            ("ZHIHU_MAX_ANSWERS", self.max_answers, 0),
            ("ZHIHU_MAX_COMMENTS", self.max_comments, 0),
            ("ZHIHU_PAGE_SIZE", self.page_size, 1),
            ("ZHIHU_COMMENT_PAGE_SIZE", self.comment_page_size, 1),
            ("ZHIHU_MAX_RETRIES", self.max_retries, 0),
        ):
            if value < low:
                raise ValueError(f"{name}={value!r} must be >= {low}")
        if self.answer_sort not in SORTS:
            raise ValueError(
                f"ZHIHU_ANSWER_SORT={self.answer_sort!r} must be one of {sorted(SORTS)}"
            )
        if self.comment_order not in COMMENT_ORDERS:
            allowed = sorted(COMMENT_ORDERS)
            raise ValueError(f"ZHIHU_COMMENT_ORDER={self.comment_order!r} must be one of {allowed}")
        if "." not in self.signer:
            raise ValueError(f"ZHIHU_SIGNER={self.signer!r} must be an import path module.Class")
        if not self.api_version:
            raise ValueError("ZHIHU_API_VERSION='' must name the x-api-version header value")
        if self.challenge_timeout <= 0:
            raise ValueError(f"ZHIHU_CHALLENGE_TIMEOUT={self.challenge_timeout!r} must be > 0")
        if self.challenge_browser and not self.browser_executable:
            raise ValueError(
                "BROWSER_EXECUTABLE='' must name the Chromium binary ZHIHU_CHALLENGE_BROWSER uses"
            )
        if "{account}" not in self.password_env:
            raise ValueError(f"ZHIHU_PASSWORD_ENV={self.password_env!r} must contain {{account}}")
