"""Scrapy's own boolean and number settings (and lists of numbers), checked as the crawler starts.

Scrapy's getters raise an error that names no setting, from whichever component reads the
value first (a traceback); these checks name it. A number Scrapy reads with ``getint`` given
as text or a float that holds a whole number is set to it (``getint("8.0")`` failed), and a
fraction or a bool is refused (``getint`` read 2.5 as 2 and True as 1).
"""

from __future__ import annotations

from scrapy.settings import BaseSettings, default_settings

from crawler.settings_values import get_bool, get_float, get_list, int_value

# Scrapy's boolean settings, read at start (a bad value is refused naming the setting); one
# whose default is a number is a switch too (TELNETCONSOLE_ENABLED=1: "maybe" failed the start
# with a traceback naming nothing)
SCRAPY_BOOLEANS = tuple(
    name
    for name, value in vars(default_settings).items()
    if name.isupper()
    and (isinstance(value, bool) or (name.endswith("_ENABLED") and isinstance(value, int)))
)

# Scrapy's number settings (TELNETCONSOLE_ENABLED's default is 1): "abc" failed the start with a
# traceback of whichever component read it, naming no setting
SCRAPY_NUMBERS = tuple(
    name
    for name, value in vars(default_settings).items()
    if name.isupper()
    and isinstance(value, int | float)
    and not isinstance(value, bool)
    and not name.endswith("_ENABLED")
)

# Scrapy's settings that Scrapy 2.19 reads with getint (tests/test_settings.py checks the list
# against its source): int("8.0") failed the start with a traceback naming nothing, and 2.5
# was read as 2 and True as 1 (DEPTH_LIMIT=0.5 turned the limit off)
SCRAPY_INTEGERS = (
    "AWS_MAX_POOL_CONNECTIONS",
    "CLOSESPIDER_ERRORCOUNT",
    "CLOSESPIDER_ITEMCOUNT",
    "CLOSESPIDER_PAGECOUNT",
    "CLOSESPIDER_PAGECOUNT_NO_ITEM",
    "CLOSESPIDER_TIMEOUT_NO_ITEM",
    "CONCURRENT_ITEMS",
    "CONCURRENT_REQUESTS",
    "CONCURRENT_REQUESTS_PER_DOMAIN",
    "CONCURRENT_REQUESTS_PER_IP",
    "DEPTH_LIMIT",
    "DEPTH_PRIORITY",
    "DNSCACHE_SIZE",
    "DOWNLOAD_MAXSIZE",
    "DOWNLOAD_WARNSIZE",
    "FEED_EXPORT_BATCH_ITEM_COUNT",
    "FEED_EXPORT_INDENT",
    "FILES_EXPIRES",
    "HTTPCACHE_EXPIRATION_SECS",
    "IMAGES_EXPIRES",
    "IMAGES_MIN_HEIGHT",
    "IMAGES_MIN_WIDTH",
    "MAIL_PORT",
    "MEMUSAGE_LIMIT_MB",
    "MEMUSAGE_WARNING_MB",
    "METAREFRESH_MAXDELAY",
    "REACTOR_THREADPOOL_MAXSIZE",
    "REDIRECT_MAX_TIMES",
    "REDIRECT_PRIORITY_ADJUST",
    "REMOTE_CONTROL_OUTPUT_MAX_BYTES",
    "REMOTE_CONTROL_TRACEBACK_MAX_BYTES",
    "RETRY_PRIORITY_ADJUST",
    "RETRY_TIMES",
    "SCRAPER_SLOT_MAX_ACTIVE_SIZE",
    "URLLENGTH_LIMIT",
)


def whole_scrapy_integers(settings: BaseSettings, *, refuse: bool) -> None:
    """Each of ``SCRAPY_INTEGERS`` given as text or a float that holds a whole number is set
    to it, at the priority it was given with; any other value is refused naming the setting
    (``refuse``), or left to the check that refuses it."""
    for name in SCRAPY_INTEGERS:
        given = settings[name]  # not get(): Scrapy's get() warns of deprecated names it reads
        if given is None or (isinstance(given, int) and not isinstance(given, bool)):
            continue
        try:
            whole = int_value(name, given)
        except ValueError:
            if refuse:
                raise
            continue
        settings.set(name, whole, priority=settings.getpriority(name) or 0)


# Scrapy's lists of status codes that Scrapy 2.19 reads with getlist and does not convert:
# "-s HTTPERROR_ALLOWED_CODES=403" gave ["403"], which no status (an int) is in
# (RETRY_HTTP_CODES and HTTPCACHE_IGNORE_HTTP_CODES are read with int())
SCRAPY_INTEGER_LISTS = ("HTTPERROR_ALLOWED_CODES",)


def whole_scrapy_integer_lists(settings: BaseSettings) -> None:
    """Each of ``SCRAPY_INTEGER_LISTS`` given as text (``403,404`` or a JSON array) or with
    text items is set to its list of integers, at the priority it was given with; an item
    that is not a whole number is refused naming the setting."""
    for name in SCRAPY_INTEGER_LISTS:
        given = settings[name]
        if isinstance(given, list | tuple) and all(_is_int(code) for code in given):
            continue
        codes = [int_value(name, code) for code in get_list(settings, name)]
        settings.set(name, codes, priority=settings.getpriority(name) or 0)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_scrapy_values(settings: BaseSettings) -> None:
    """Refuse, naming the setting, a Scrapy boolean or number setting Scrapy cannot read (or
    would read as another number); set its whole numbers given as text to the numbers."""
    for name in SCRAPY_BOOLEANS:
        get_bool(settings, name)
    for name in SCRAPY_NUMBERS:
        get_float(settings, name)
    whole_scrapy_integers(settings, refuse=True)
    whole_scrapy_integer_lists(settings)
