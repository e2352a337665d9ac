"""Settings: profiles and environment overrides resolve as documented."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import scrapy
from scrapy.settings import SETTINGS_PRIORITIES, Settings

from crawler.addon import ClusterAddon
from crawler.demo.nodes import REPO_ROOT
from crawler.scrapy_values import SCRAPY_INTEGERS
from crawler.session_spider import SESSION_MIDDLEWARE, check_session_spider
from crawler.setting_names import known_names
from settings.resolve import resolve_settings


def test_settings_package_is_this_repositorys() -> None:
    import settings

    assert Path(settings.__file__).resolve().parent == REPO_ROOT / "settings"


def test_dev_profile_is_the_default() -> None:
    values = resolve_settings({})
    assert values["CRAWLER_PROFILE"] == "dev"
    assert values["ROBOTSTXT_OBEY"] is False
    assert values["REDIS_URL"] == ""
    assert values["FRONTIER_LEASE_TIMEOUT"] == 60.0


def test_prod_profile_and_environment_overrides() -> None:
    values = resolve_settings(
        {
            "CRAWLER_PROFILE": "prod",
            "REDIS_URL": "redis://r:6379/2",
            "KAFKA_BOOTSTRAP_SERVERS": "k1:9092,k2:9092",
            "CRAWLER_NODE_ID": "n7",
            # read as the bare CRAWLER_NODE_ID is: a node ran crawl 'default' without a word
            # (an audit), only CRAWLER_SETTING_CRAWLER_CRAWL_ID was read
            "CRAWLER_CRAWL_ID": "c2",
            "CRAWLER_LOG_LEVEL": "DEBUG",
        }
    )
    assert values["CRAWLER_PROFILE"] == "prod"
    assert values["ROBOTSTXT_OBEY"] is True
    assert values["REDIS_URL"] == "redis://r:6379/2"
    assert values["KAFKA_BOOTSTRAP_SERVERS"] == "k1:9092,k2:9092"
    assert values["CRAWLER_NODE_ID"] == "n7"
    assert values["CRAWLER_CRAWL_ID"] == "c2"
    assert values["LOG_LEVEL"] == "DEBUG"


def test_unknown_profile_names_the_variable() -> None:
    with pytest.raises(ValueError, match=r"CRAWLER_PROFILE='staging' is not a profile"):
        resolve_settings({"CRAWLER_PROFILE": "staging"})


def _scrapy_setting(name: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "settings", "--get", name],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def test_scrapy_reads_the_resolved_settings() -> None:
    env = {**os.environ, "CRAWLER_PROFILE": "prod", "REDIS_URL": "redis://example:1/0"}
    assert _scrapy_setting("REDIS_URL", env) == "redis://example:1/0"
    assert _scrapy_setting("RETRY_TIMES", env) == "3"
    assert _scrapy_setting("REMOTE_CONTROL_ENABLED", env) == "False"


def test_the_services_env_puts_the_tools_on_path_with_the_chosen_ports(tmp_path: Path) -> None:
    """``eval "$(python -m crawler.devservices env)"``: the ports ``make services`` chose
    (here from REDIS_PORT) and the project's ``crawler`` and ``scrapy`` on PATH."""
    script = (
        f'eval "$({sys.executable} -m crawler.devservices env)"; '
        'echo "$REDIS_URL"; command -v crawler; command -v scrapy'
    )
    env = {"PATH": "/usr/bin:/bin", "REDIS_PORT": "6411", "HOME": str(tmp_path)}
    result = subprocess.run(
        ["bash", "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    url, crawler_bin, scrapy_bin = result.stdout.split()
    assert url == "redis://127.0.0.1:6411/0"
    venv_bin = Path(sys.executable).parent
    assert (Path(crawler_bin), Path(scrapy_bin)) == (venv_bin / "crawler", venv_bin / "scrapy")


@pytest.mark.parametrize(
    ("given", "redis_url", "said"),
    [
        ("DECOMPRESSION_MAXSIZE=abc", "", "DECOMPRESSION_MAXSIZE='abc' is not an integer"),
        ("POLITENESS_BURST=2.5", "", "POLITENESS_BURST='2.5' is not an integer"),
        # Scrapy's own numbers: a traceback of the component that read it, naming nothing
        ("DEPTH_LIMIT=abc", "", "DEPTH_LIMIT='abc' is not a number"),
        ("CONCURRENT_REQUESTS=1,5", "", "CONCURRENT_REQUESTS='1,5' is not a number"),
        # Scrapy waits 0 s for it: a delay asked for, and none kept, without a word (an audit)
        # on Twisted's default path: a CRITICAL 'Unhandled error in Deferred' and two
        # tracebacks around the reason (an audit)
        (
            "TWISTED_REACTOR=twisted.internet.epollreactor.EPollReactor",
            "redis://127.0.0.1:1/0",
            "Not started: TWISTED_REACTOR='twisted.internet.epollreactor.EPollReactor' with "
            "REDIS_URL set",
        ),
        # an audit: without a reactor every download failed standalone, and the run exited 0
        # with 0 items; a traceback in cluster mode
        *(
            (
                "TWISTED_REACTOR_ENABLED=False",
                redis_url,
                "Not started: TWISTED_REACTOR_ENABLED=False: this project runs on Twisted's "
                "asyncio reactor",
            )
            for redis_url in ("", "redis://127.0.0.1:1/0")
        ),
        (
            "DOWNLOAD_DELAY=-1",
            "redis://127.0.0.1:1/0",
            "DOWNLOAD_DELAY=-1.0 must be a number of seconds >= 0",
        ),
        # Scrapy takes them and never downloads: a node held its leases and outlived a SIGTERM
        # (audit AS)
        (
            "CONCURRENT_REQUESTS_PER_DOMAIN=0",
            "redis://127.0.0.1:1/0",
            "CONCURRENT_REQUESTS_PER_DOMAIN=0 must be >= 1: a node with it never downloads",
        ),
        (
            "CONCURRENT_REQUESTS=-1",
            "redis://127.0.0.1:1/0",
            "CONCURRENT_REQUESTS=-1 must be >= 1",
        ),
        # refused as the crawler is built, not as the engine opens the spider (where it came
        # chained under Scrapy's 'Engine slot not assigned')
        (
            "FRONTIER_PARTITIONS=0",
            "redis://127.0.0.1:1/0",
            "FRONTIER_PARTITIONS=0 must be between 1 and 1024",
        ),
    ],
)
def test_a_setting_that_does_not_hold_stops_the_crawl_naming_it(
    given: str, redis_url: str, said: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "KAFKA_"))}
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "pages", "-s", given],
        cwd=REPO_ROOT,
        env={**env, "REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode != 0
    assert said in result.stderr
    assert "Engine slot not assigned" not in result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def test_scrapy_s_own_whole_numbers_are_taken_however_written_and_fractions_refused() -> None:
    """``-s CONCURRENT_REQUESTS=8.0`` passed the add-on's check (a number) and failed the start
    in Scrapy's ``getint`` with a traceback naming no setting (an audit); 2.5 was read as 2
    and True as 1 (``DEPTH_LIMIT=0.5``: no limit). A whole number is now the number, at the
    priority it was given with; a fraction or a bool is refused, naming the setting."""
    settings = Settings(resolve_settings({}))
    settings.set("CONCURRENT_REQUESTS", "8.0", priority="cmdline")
    settings.set("RETRY_TIMES", 3.0, priority="spider")
    settings.set("DOWNLOAD_DELAY", "0.25", priority="cmdline")  # read with getfloat
    settings.set("DEPTH_LIMIT", "3", priority="cmdline")
    ClusterAddon().update_settings(settings)
    assert settings.getint("CONCURRENT_REQUESTS") == 8
    assert settings.getint("RETRY_TIMES") == 3
    assert settings.getfloat("DOWNLOAD_DELAY") == 0.25
    assert settings.getint("DEPTH_LIMIT") == 3
    assert settings.getpriority("CONCURRENT_REQUESTS") == SETTINGS_PRIORITIES["cmdline"]
    assert settings.getpriority("RETRY_TIMES") == SETTINGS_PRIORITIES["spider"]
    for name, given in (("DEPTH_LIMIT", "0.5"), ("RETRY_TIMES", 2.5), ("CONCURRENT_ITEMS", True)):
        refused = Settings(resolve_settings({}))
        refused.set(name, given, priority="cmdline")
        with pytest.raises(ValueError, match=rf"^{name}={given!r} is not an integer$"):
            ClusterAddon().update_settings(refused)
    # The process's settings, which Scrapy reads before any crawler (its thread pool)
    process = Settings(resolve_settings({}))
    process.set("REACTOR_THREADPOOL_MAXSIZE", "20.0", priority="cmdline")
    process.set("DNSCACHE_SIZE", "x", priority="cmdline")  # refused with the crawler's
    ClusterAddon.update_pre_crawler_settings(process)
    assert process.getint("REACTOR_THREADPOOL_MAXSIZE") == 20
    assert process.get("DNSCACHE_SIZE") == "x"


def test_the_whole_number_settings_are_those_scrapy_reads_with_getint() -> None:
    """``SCRAPY_INTEGERS`` against Scrapy's source: a setting it reads with ``getint`` that the
    list lacks would fail on "8.0" again."""
    source = Path(scrapy.__file__).parent
    read = set()
    for path in source.rglob("*.py"):
        text = path.read_text()
        read.update(re.findall(r'getint\(\s*"([A-Z_]+)"', text))
        read.update(re.findall(r'getint\(\s*resolve\("([A-Z_]+)"\)', text))
    assert read - set(SCRAPY_INTEGERS) == set()
    assert len(read) >= 30


def test_a_setting_name_one_letter_off_a_known_one_is_named_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Scrapy passes any setting name on, so a misspelt one (the environment's
    CRAWLER_SETTING_<NAME>, -s, custom_settings) left the default in place without a word:
    CRAWLER_SETTING_KAFKA_FLUSH_TIMOUT kept a 60 s flush under a shorter grace. A name close
    to one Scrapy or this project reads is now named with the one it resembles; a name of the
    user's own (nothing close) is not."""
    settings = Settings(resolve_settings({"CRAWLER_SETTING_KAFKA_FLUSH_TIMOUT": "5"}))
    settings.set("FRONTIER_LEASE_TIMOUT", "4", priority="cmdline")
    settings.set("CONCURENT_REQUESTS", "4", priority="spider")
    settings.set("MY_PIPELINE_API_URL", "http://x.test/", priority="cmdline")
    with caplog.at_level(logging.WARNING, logger="crawler.addon"):
        ClusterAddon().update_settings(settings)
    named = [r.getMessage() for r in caplog.records if "resembles" in r.getMessage()]
    assert len(named) == 3, caplog.text
    joined = "\n".join(named)
    for given, meant in (
        ("KAFKA_FLUSH_TIMOUT", "KAFKA_FLUSH_TIMEOUT"),
        ("FRONTIER_LEASE_TIMOUT", "FRONTIER_LEASE_TIMEOUT"),
        ("CONCURENT_REQUESTS", "CONCURRENT_REQUESTS"),
    ):
        assert f"{given} resembles {meant}" in joined, joined
    assert "MY_PIPELINE_API_URL" not in joined


def test_a_misspelt_scrapy_redis_or_scrapy_playwright_name_is_named_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only Scrapy's, the project's and a few scrapy-redis names were known: REDIS_HOTS (the
    node then ran standalone), REDIS_START_URLS_AS_ZST (seeds read as a list) or
    PLAYWRIGHT_LAUNCH_OPTION passed without a word. The names the project sets for itself
    are known, never named."""
    settings = Settings(resolve_settings({}))
    for given in (
        "REDIS_HOTS",
        "REDIS_PRAMS",
        "REDIS_START_URLS_AS_ZST",
        "SCHEDULER_IDLE_BEFORE_CLOS",
        "PLAYWRIGHT_LAUNCH_OPTION",
        "REDIS_URI",  # one letter off a short name: below difflib's 0.9 (an audit)
        "politeness_rate",  # -s politeness_rate=1 ran at the default rate (an audit)
    ):
        settings.set(given, "x", priority="cmdline")
    for own in ("CRAWLER_SPIDER_ARGUMENTS", "CRAWLER_STANDALONE_COMMAND"):
        settings.set(own, "x", priority="cmdline")
    with caplog.at_level(logging.WARNING, logger="crawler.addon"):
        ClusterAddon().update_settings(settings)
    joined = "\n".join(r.getMessage() for r in caplog.records if "resembles" in r.getMessage())
    for given, meant in (
        ("REDIS_HOTS", "REDIS_HOST"),
        ("REDIS_PRAMS", "REDIS_PARAMS"),
        ("REDIS_START_URLS_AS_ZST", "REDIS_START_URLS_AS_ZSET"),
        ("SCHEDULER_IDLE_BEFORE_CLOS", "SCHEDULER_IDLE_BEFORE_CLOSE"),
        ("PLAYWRIGHT_LAUNCH_OPTION", "PLAYWRIGHT_LAUNCH_OPTIONS"),
        ("REDIS_URI", "REDIS_URL"),
        ("politeness_rate", "POLITENESS_RATE"),
    ):
        assert f"{given} resembles {meant}" in joined, joined
    assert "CRAWLER_" not in joined
    assert known_names() >= {"CRAWLER_DOWNLOAD_HANDLERS", "REDIS_ITEMS_KEY", "SCHEDULER_PERSIST"}


class MembersSpider(scrapy.Spider):
    name = "members"
    session_platform = "shop"


@pytest.mark.parametrize(
    ("given", "platform", "said"),
    [
        ({"SESSIONS_ENABLED": "False"}, "shop", "but SESSIONS_ENABLED is False"),
        (
            {"DOWNLOADER_MIDDLEWARES": {SESSION_MIDDLEWARE: None}},
            "shop",
            f"but DOWNLOADER_MIDDLEWARES turns {SESSION_MIDDLEWARE} off",
        ),
        ({}, "na site", "spider members's session_platform: platform='na site' must be 1-64"),
    ],
)
def test_a_spider_whose_sessions_cannot_be_served_is_refused_at_start(
    given: dict[str, object], platform: str, said: str
) -> None:
    """Sessions turned off fetched every page of a session spider without its log-in, without
    a word; a platform name the keys cannot hold failed every request with a traceback (an
    audit)."""
    settings = Settings(resolve_settings({}))
    settings.setdict(given, priority="cmdline")
    ClusterAddon().update_settings(settings)
    spider = type("Members", (MembersSpider,), {"session_platform": platform})
    with pytest.raises(ValueError, match=re.escape(said)):
        check_session_spider(spider, settings)
    check_session_spider(scrapy.Spider, settings)  # no sessions asked for: nothing to serve


def test_a_session_spider_with_its_middleware_on_starts() -> None:
    settings = Settings(resolve_settings({}))
    ClusterAddon().update_settings(settings)
    check_session_spider(MembersSpider, settings)


def crawl_with_their_settings(
    tmp_path: Path, spider: str, redis_url: str = "redis://127.0.0.1:1/0"
) -> subprocess.CompletedProcess[str]:
    """``scrapy crawl <spider>`` with the settings module ``theirs.settings`` under
    ``tmp_path`` and ``redis_url`` (by default one nothing answers at)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "KAFKA_"))}
    env |= {"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO_ROOT}"}
    env |= {"SCRAPY_SETTINGS_MODULE": "theirs.settings", "REDIS_URL": redis_url}
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", spider],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_a_settings_module_without_the_project_s_is_refused_saying_what_to_do(
    tmp_path: Path,
) -> None:
    """A scrapy-redis project kept its own settings.py (its two scrapy-redis lines deleted, the
    add-on named): the start died on "SEEDS_TYPE=None must be one of list, set, zset" under
    asyncio's "Task exception was never retrieved", naming nothing to do."""
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "__init__.py").write_text("")
    (tmp_path / "theirs" / "settings.py").write_text(
        'BOT_NAME = "theirs"\n'
        'SPIDER_MODULES = ["crawler.spiders"]\n'
        'ADDONS = {"crawler.addon.ClusterAddon": 0}\n'
    )
    result = crawl_with_their_settings(tmp_path, "pages")
    assert result.returncode != 0
    assert "this project's settings are not loaded" in result.stderr, result.stderr
    assert "from settings import *" in result.stderr


@pytest.mark.parametrize(
    ("settings_lines", "spider_settings"),
    [
        ('ADDONS = {"theirs.addon.TheirAddon": 10}\n', "{}"),
        ("", '{"ADDONS": {"crawler.addon.ClusterAddon": None}}'),
        ("", '{"ADDONS": {"crawler.addon.ClusterAddon": 0, "theirs.addon.TheirAddon": 10}}'),
    ],
    ids=["their_addons_replace_the_project_s", "the_cluster_addon_turned_off", "as_it_says"],
)
def test_addons_without_the_cluster_addon_are_refused_saying_what_to_do(
    tmp_path: Path, settings_lines: str, spider_settings: str, redis_url: str
) -> None:
    """Scrapy's docs enable an add-on with ``ADDONS = {...}`` in settings.py: written after
    ``from settings import *`` it replaced the project's, ClusterAddon never ran, and each node
    crawled alone on Scrapy's scheduler with nothing in Redis or Kafka, exit 0, no word."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "__init__.py").write_text("")
    (theirs / "addon.py").write_text("class TheirAddon:\n    pass\n")
    (theirs / "settings.py").write_text(
        f'from settings import *\nSPIDER_MODULES = ["theirs.spiders"]\n{settings_lines}'
    )
    (theirs / "spiders.py").write_text(
        "import scrapy\n\n\nclass Nothing(scrapy.Spider):\n"
        f'    name = "nothing"\n    custom_settings = {spider_settings}\n'
    )
    working = "TheirAddon" in spider_settings
    result = crawl_with_their_settings(tmp_path, "nothing", redis_url)
    if working:  # what the refusal says to write instead
        assert result.returncode == 0, result.stderr
        assert "TheirAddon" in result.stderr and "ClusterAddon" in result.stderr
        return
    assert result.returncode == 1, result.stderr
    assert "ADDONS has no crawler.addon.ClusterAddon" in result.stderr, result.stderr
    assert "Spider opened" not in result.stderr
