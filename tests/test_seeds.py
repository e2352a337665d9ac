"""Seed parsing: plain URLs, JSON payloads, and every rejection reason."""

from __future__ import annotations

import pytest

from crawler.frontier.seeds import InvalidSeed, Seed, parse_seed

LIMIT = 1024


def test_plain_url() -> None:
    assert parse_seed(b"  https://example.com/a?b=1 \n", max_bytes=LIMIT) == Seed(
        url="https://example.com/a?b=1"
    )


def test_json_seed_with_every_field() -> None:
    raw = (
        b'{"url": "http://h:8080/x", "meta": {"k": "\xe4\xb8\xad"}, "priority": -3,'
        b' "method": "post", "headers": {"X-A": "1"}, "body": "q=1", "callback": "parse_x",'
        b' "dont_filter": true}'
    )
    seed = parse_seed(raw, max_bytes=LIMIT)
    assert seed == Seed(
        url="http://h:8080/x",
        meta={"k": "中"},
        priority=-3,
        method="POST",
        headers={"X-A": "1"},
        body="q=1",
        callback="parse_x",
        dont_filter=True,
    )


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "empty"),
        (b"   ", "empty"),
        (b"not a url", "scheme"),
        (b"ftp://host/file", "scheme"),
        (b"http://", "url"),
        (b"http://host:99999/", "url"),
        (b"\xff\xfe", "encoding"),
        (b'{"url": ', "json"),
        (b'["http://a"]', "json"),
        (b'{"meta": {}}', "url"),
        (b'{"url": 5}', "url"),
        (b'{"url": "javascript:alert(1)"}', "scheme"),
        (b'{"url": "http://a", "form": {"nested": 1}}', "field"),
        (b'{"url": "http://a", "body": "x", "q": "1"}', "field"),
        (b'{"url": "http://a", "priority": "high"}', "field"),
        (b'{"url": "http://a", "priority": true}', "field"),
        (b'{"url": "http://a", "meta": []}', "field"),
        (b'{"url": "http://a", "headers": {"a": 1}}', "field"),
        (b'{"url": "http://a", "method": "BREW"}', "field"),
        (b'{"url": "http://a", "dont_filter": "yes"}', "field"),
    ],
)
def test_invalid_seeds_carry_a_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(InvalidSeed) as caught:
        parse_seed(raw, max_bytes=LIMIT)
    assert caught.value.reason == reason


def test_a_url_that_is_no_string_is_said_so() -> None:
    with pytest.raises(InvalidSeed, match="seed url 5 is not a string"):
        parse_seed(b'{"url": 5}', max_bytes=LIMIT)


def test_oversized_seed_is_rejected_before_parsing() -> None:
    with pytest.raises(InvalidSeed, match="exceeds 1024") as caught:
        parse_seed(b'{"url": "http://a/' + b"x" * LIMIT + b'"}', max_bytes=LIMIT)
    assert caught.value.reason == "too_large"
