"""``mask_secrets``: URL credentials never reach a log line or a failure record."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import orjson
import pytest

from crawler.demo.server import BackgroundHTTPServer, QuietHandler
from crawler.devservices import free_port
from crawler.url_credentials import mask_secrets
from tests.one_node import NodeRun, crawl, page, send


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("http://user:s3cret@127.0.0.1:8080/p?q=1", "http://user:***@127.0.0.1:8080/p?q=1"),
        ("https://ghp_token@github.com/x.git", "https://***@github.com/x.git"),
        ("http://user:@host/", "http://user:***@host/"),
        ("http://u:p@ss@host/a@b", "http://u:***@host/a@b"),  # the last @ of the authority
        ("http://u:p%40w@[::1]:80/", "http://u:***@[::1]:80/"),
        ("ftp://anon:x@files.example", "ftp://anon:***@files.example"),
        ("http://host/p?token=abc&page=2", "http://host/p?token=***&page=2"),
        ("http://host/p?page=2&API_KEY=k#top", "http://host/p?page=2&API_KEY=***#top"),
        ("http://host/p?tokens=1&mytoken=2", "http://host/p?tokens=1&mytoken=2"),
        ("http://host/a@b?x=1", "http://host/a@b?x=1"),  # "@" in the path is no user
        ("http://example.com/", "http://example.com/"),
        ("no url here: a@b.c", "no url here: a@b.c"),
        ("invalid hostname: bob:pw@127.0.0.1", "invalid hostname: bob:***@127.0.0.1"),
        ("at 14:21:35 mail me@x.org", "at 14:21:35 mail me@x.org"),
    ],
)
def test_masks_one_url(text: str, masked: str) -> None:
    assert mask_secrets(text) == masked


def test_masks_every_url_of_a_log_line() -> None:
    line = (
        "Error downloading <GET http://bob:hunter2@127.0.0.1:1/p>: Connection refused "
        "(redirected from 'https://bob:hunter2@a.example/?password=hunter2')"
    )
    masked = mask_secrets(line)
    assert "hunter2" not in masked
    assert masked == (
        "Error downloading <GET http://bob:***@127.0.0.1:1/p>: Connection refused "
        "(redirected from 'https://bob:***@a.example/?password=***')"
    )


PASSWORD = "hunter2"  # noqa: S105 - the secret the tests look for


# -- a real node: a seed with credentials (Scrapy 2.19 cannot fetch one: "invalid hostname")
# and a redirect to a URL with credentials on another site (refused)


class CredentialSite(BackgroundHTTPServer):
    """``/jump`` answers 302 to ``offsite``; every other path is a page."""

    def __init__(self, offsite: str) -> None:
        class Handler(QuietHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/jump"):
                    send(self, 302, Location=offsite)
                else:
                    send(self, 200, page(self.path))

        handler: type[BaseHTTPRequestHandler] = Handler
        super().__init__(handler)


def with_credentials(base_url: str) -> str:
    return base_url.replace("//", f"//bob:{PASSWORD}@")


@pytest.fixture(scope="module")
def failed_with_credentials(
    tmp_path_factory: pytest.TempPathFactory, module_redis_url: str
) -> NodeRun:
    other = with_credentials(f"http://127.0.0.1:{free_port()}")
    with CredentialSite(offsite=other + f"/landing?token={PASSWORD}") as site:
        return crawl(
            "pages",
            [with_credentials(site.base_url) + f"/p?token={PASSWORD}", site.base_url + "/jump"],
            workdir=tmp_path_factory.mktemp("credentials"),
            redis_url=module_redis_url,
            settings={"LOG_LEVEL": "DEBUG"},
        )


def test_no_log_line_shows_a_url_password(failed_with_credentials: NodeRun) -> None:
    log = failed_with_credentials.log
    assert "Error downloading <GET http://bob:***@127.0.0.1:" in log  # Scrapy's ERROR line
    assert "invalid hostname: bob:***@127.0.0.1" in log  # its traceback
    assert "Refused the redirect from http://127.0.0.1:" in log
    assert "to http://bob:***@127.0.0.1:" in log
    assert PASSWORD not in log


def test_failure_records_name_the_failure_without_the_password(
    failed_with_credentials: NodeRun,
) -> None:
    records = failed_with_credentials.failed
    assert sorted(record["reason"] for record in records) == [
        "download/ValueError",
        "redirect/offsite",
    ]
    assert all(PASSWORD not in record["error"] for record in records), records


def test_failure_records_store_the_request_without_the_password(
    failed_with_credentials: NodeRun,
) -> None:
    records = failed_with_credentials.failed
    assert records
    assert all(PASSWORD not in orjson.dumps(record).decode() for record in records), records
