"""A CrawlSpider's requests keep their rule through a redeploy that reorders the rules."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule
from scrapy.utils.test import get_crawler

from crawler.frontier.client import Lease
from crawler.frontier.request_store import RequestStore

DETAIL = Rule(LinkExtractor(allow=r"/d/"), callback="parse_item")
LISTING = Rule(LinkExtractor(allow=r"/p/"), follow=True)


class Before(CrawlSpider):
    name = "shop"
    rules: tuple[Rule, ...] = (DETAIL, LISTING)

    def parse_item(self, response: Any) -> dict[str, str]:
        return {"url": response.url}


class Reordered(Before):
    """A new version: a rule inserted first, the two others swapped."""

    rules = (Rule(LinkExtractor(allow=r"/new/"), callback="parse_item"), LISTING, DETAIL)


class Widened(Before):
    """A new version whose detail rule allows more links: the same rule, handling alike."""

    rules = (LISTING, Rule(LinkExtractor(allow=r"/(d|detail)/"), callback="parse_item"))


class Changed(Before):
    """A new version whose detail rule calls another callback: not the rule that made them."""

    rules = (Rule(LinkExtractor(allow=r"/d/"), callback="parse_other"), LISTING)

    def parse_other(self, response: Any) -> dict[str, str]:
        return {"other": response.url}


def store(spider_class: type[CrawlSpider]) -> RequestStore:
    crawler = get_crawler(spider_class)
    return RequestStore(crawler, spider_class.from_crawler(crawler))


def rules(store: RequestStore) -> list[Rule]:
    assert isinstance(store.spider, CrawlSpider)
    return store.spider._rules


def queued_by(spider_class: type[CrawlSpider]) -> dict[str, bytes]:
    """The requests the spider's rules make from one listing page, as stored."""
    old = store(spider_class)
    page = HtmlResponse(
        "http://shop/p/1",
        body=b'<a href="/d/7">item</a><a href="/p/2">next</a>',
        encoding="utf-8",
        request=Request("http://shop/p/1"),
    )
    assert isinstance(old.spider, CrawlSpider)
    made = [r for r in old.spider._requests_to_follow(page) if isinstance(r, Request)]
    return {request.url: old.encode(request, "").body for request in made}


def test_a_request_finds_its_rule_where_a_new_version_moved_it() -> None:
    """The request kept its rule's position only: after a redeploy that reordered the rules,
    list pages were scraped as items and pages never fetched (an audit), silently."""
    stored = queued_by(Before)
    new = store(Reordered)
    item = new.decode(Lease("l1", stored["http://shop/d/7"]))
    listing = new.decode(Lease("l2", stored["http://shop/p/2"]))
    extractor = rules(new)[item.meta["rule"]].link_extractor
    assert isinstance(extractor, LinkExtractor) and extractor.allow_res[0].pattern == "/d/"
    assert rules(new)[listing.meta["rule"]].follow is True
    assert "_rule_signature" not in item.meta  # the spider's callbacks see Scrapy's meta only


def test_a_request_finds_its_rule_when_a_new_version_widened_its_links() -> None:
    """A redeploy that widened a rule's allow pattern failed every queued request of it,
    though the rule handles them alike (a review)."""
    stored = queued_by(Before)
    new = store(Widened)
    assert new.decode(Lease("l1", stored["http://shop/d/7"])).meta["rule"] == 1
    assert new.decode(Lease("l2", stored["http://shop/p/2"])).meta["rule"] == 0


def test_a_request_whose_rule_is_gone_fails_saying_so() -> None:
    stored = queued_by(Before)
    with pytest.raises(ValueError, match=r"have no rule\(s\) with its callback"):
        store(Changed).decode(Lease("l1", stored["http://shop/d/7"]))
    assert store(Changed).decode(Lease("l2", stored["http://shop/p/2"])).meta["rule"] == 1


def test_the_same_version_reads_its_requests_as_they_were() -> None:
    stored = queued_by(Before)
    same = store(Before)
    assert same.decode(Lease("l1", stored["http://shop/d/7"])).meta["rule"] == 0
    assert same.decode(Lease("l2", stored["http://shop/p/2"])).meta["rule"] == 1
