"""``mask_secrets``: URL credentials never reach a log line or a failure record."""

from __future__ import annotations

import pytest

from crawler.url_credentials import mask_secrets


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
