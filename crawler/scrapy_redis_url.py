"""scrapy-redis's connection settings (REDIS_HOST, REDIS_PORT, REDIS_DB, REDIS_PARAMS) folded into
REDIS_URL, or refused where they contradict it."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlencode

from scrapy.settings import BaseSettings

from crawler.scrapy_redis_given import given, refuse, setting_priority
from crawler.settings_values import get_dict, get_int

# REDIS_PARAMS keys we can express in REDIS_URL (path or query); the rest are refused
URL_PARAMS = {"db", "username", "password", "socket_timeout", "socket_connect_timeout", "url"}
IGNORABLE_PARAMS = {"retry_on_timeout", "encoding"}  # scrapy-redis's defaults, no meaning here


def redis_url_setting(settings: BaseSettings) -> None:
    """REDIS_HOST / REDIS_PORT / REDIS_DB / REDIS_PARAMS -> REDIS_URL; given together with a
    REDIS_URL that says otherwise, the start stops (scrapy-redis let one silently win)."""
    params = get_dict(settings, "REDIS_PARAMS") if given(settings, "REDIS_PARAMS") else {}
    unknown = set(params) - URL_PARAMS - IGNORABLE_PARAMS
    if unknown:
        raise refuse(
            "REDIS_PARAMS",
            {key: "***" if "pass" in key else value for key, value in params.items()},
            f"{', '.join(sorted(unknown))} cannot be expressed here; give REDIS_URL with the "
            "options of docs/deployment.md (REDIS_PARAMS may hold "
            f"{', '.join(sorted(URL_PARAMS))})",
        )
    _check_param_numbers(params)
    parts = [name for name in ("REDIS_HOST", "REDIS_PORT", "REDIS_DB") if given(settings, name)]
    if settings.get("REDIS_URL") or params.get("url"):
        if parts:
            raise ValueError(
                f"REDIS_URL and {', '.join(parts)} are both given: put host, port and database "
                "in REDIS_URL only"
            )
        if params.get("url") and settings.get("REDIS_URL") not in (None, "", params["url"]):
            raise ValueError(
                "REDIS_URL and REDIS_PARAMS['url'] are both given and differ: give one URL"
            )
        if params.get("url") and not settings.get("REDIS_URL"):
            settings.set(
                "REDIS_URL", params["url"], priority=setting_priority(settings, "REDIS_PARAMS")
            )
        if params:
            _url_options(settings, params)
        return
    if not parts and not params:
        return
    host = str(settings.get("REDIS_HOST") or "localhost")
    port = get_int(settings, "REDIS_PORT", 6379) if given(settings, "REDIS_PORT") else 6379
    db = get_int(settings, "REDIS_DB") if given(settings, "REDIS_DB") else int(params.get("db", 0))
    priority = max(settings.getpriority(name) or 0 for name in [*parts, "REDIS_PARAMS"])
    settings.set("REDIS_URL", f"redis://{host}:{port}/{db}", priority=priority)
    _url_options(settings, params)


def _check_param_numbers(params: dict[str, Any]) -> None:
    """REDIS_PARAMS' db is a whole number, its timeouts numbers of seconds above 0 or None,
    redis-py's default (a bad one stopped the start with "invalid literal for int()", or named
    the REDIS_URL made of it)."""
    for key in ("db", "socket_timeout", "socket_connect_timeout"):
        if key not in params or (key != "db" and params[key] is None):
            continue
        value = params[key]
        if key == "db":
            digits = re.fullmatch(r"[0-9]+", str(value).strip())
            valid = isinstance(value, int | str) and digits is not None
        else:
            try:
                valid = not isinstance(value, bool) and 0 < float(value) < float("inf")
            except (TypeError, ValueError):
                valid = False
        if not valid:
            wanted = "a database number (0, 1, ...)" if key == "db" else "seconds above 0, or None"
            raise ValueError(f"REDIS_PARAMS[{key!r}]={value!r} is not {wanted}")


def _url_options(settings: BaseSettings, params: dict[str, Any]) -> None:
    """Fold REDIS_PARAMS' credentials, database and timeouts into REDIS_URL."""
    url = str(settings.get("REDIS_URL"))
    scheme, rest = url.split("://", 1)
    netloc, _, path = rest.partition("/")
    path, _, query = path.partition("?")
    credentials = [name for name in ("username", "password") if name in params]
    if credentials and "@" in netloc:
        raise ValueError(
            f"REDIS_PARAMS' {' and '.join(credentials)} and the credentials in REDIS_URL are both "
            "given: put them in REDIS_URL only"
        )
    if "db" in params and scheme not in ("redis", "rediss"):
        raise ValueError(
            f"REDIS_PARAMS' db cannot be put in a {scheme}:// REDIS_URL here: give the database "
            "in REDIS_URL (docs/deployment.md)"
        )
    if credentials:
        user = quote(str(params.get("username") or ""), safe="")
        password = quote(str(params.get("password") or ""), safe="")
        netloc = f"{user}:{password}@{netloc}" if password else f"{user}@{netloc}"
    if "db" in params and scheme in ("redis", "rediss"):
        if path and path != str(int(params["db"])):  # scrapy-redis let the URL's win silently
            raise ValueError(
                f"REDIS_PARAMS' db {params['db']} and the database {path} in REDIS_URL are both "
                "given: put the database in REDIS_URL only"
            )
        path = str(int(params["db"]))
    timeouts = ("socket_timeout", "socket_connect_timeout")
    options = [(name, str(params[name])) for name in timeouts if params.get(name) is not None]
    if options:
        query = "&".join(filter(None, [query, urlencode(options)]))
    rebuilt = f"{scheme}://{netloc}/{path}" + (f"?{query}" if query else "")
    settings.set("REDIS_URL", rebuilt, priority=setting_priority(settings, "REDIS_URL"))
