"""The scheduler's JSON request codec: round trips, never pickle, clear errors."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import json
import logging
import math
from typing import Any

import pytest
from scrapy import FormRequest, Request, Spider
from scrapy.http import HtmlResponse, JsonRequest, XmlRpcRequest
from scrapy.http.request import CookiesT
from scrapy.linkextractors import LinkExtractor
from scrapy.loader import ItemLoader
from scrapy.utils.request import request_from_dict
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from crawler.frontier import codec
from crawler.frontier.client import Lease
from crawler.frontier.request_store import DECODE_ERRORS, RequestStore
from crawler.spiders.pages import PagesSpider


def test_request_round_trip_keeps_bytes_text_and_callback() -> None:
    spider = PagesSpider()
    request = Request(
        "http://h/页面?q=1",
        callback=spider.parse,
        headers={"X-Bin": b"\xff\x00", "Accept": "text/html"},
        body=b"\x00\x01\xfe",
        meta={"crawler_scope": "h", "depth": 2, "tags": ["中文", "😀"]},
        priority=7,
        cb_kwargs={"n": 1},
    )
    data = codec.dumps(request.to_dict(spider=spider))
    assert data.startswith(codec.COMPRESSED)
    assert codec.plain(data).startswith(b"{")  # JSON, not pickle
    restored = request_from_dict(codec.loads(data), spider=spider)
    assert restored.url == request.url
    assert restored.body == request.body
    assert restored.headers.getlist("X-Bin") == [b"\xff\x00"]
    assert restored.headers.getlist("Accept") == [b"text/html"]
    assert restored.meta == request.meta
    assert restored.priority == 7
    assert restored.cb_kwargs == {"n": 1}
    assert restored.callback == spider.parse


def test_unserializable_meta_names_the_request_and_key() -> None:
    request = Request("http://h/x", meta={"fine": 1, "socket": object()})
    with pytest.raises(codec.UnserializableRequestError, match=r"'http://h/x'.*meta key 'socket'"):
        codec.dumps(request.to_dict())


class PricedRequest(Request):
    """A subclass with an attribute of its own, stored as its ``attributes`` name it."""

    attributes = (*Request.attributes, "price")

    def __init__(self, *args: Any, price: object = None, **kwargs: Any) -> None:
        self.price = price
        super().__init__(*args, **kwargs)


@pytest.mark.parametrize(
    ("request_", "where"),
    [
        pytest.param(
            Request("http://h/x", cb_kwargs={"n": 1, "price": decimal.Decimal("9.99")}),
            "cb_kwargs key 'price'",
            id="cb_kwargs",
        ),
        pytest.param(
            Request("http://h/x", cb_kwargs={"by_id": {1: "a"}}), "cb_kwargs key 'by_id'", id="key"
        ),
        pytest.param(
            Request("http://h/x", meta={1: "a"}),  # type: ignore[dict-item]
            "field 'meta'",
            id="meta-itself",
        ),
        pytest.param(
            PricedRequest("http://h/x", price=decimal.Decimal("9.99")),
            "field 'price'",
            id="subclass-attribute",
        ),
        pytest.param(Request("http://h/x", priority=10**400), "field 'priority'", id="priority"),
    ],
)
def test_what_cannot_be_stored_is_named_wherever_it_is(request_: Request, where: str) -> None:
    """Only a meta key was named: a value elsewhere gave "a field is not JSON serializable"."""
    with pytest.raises(codec.UnserializableRequestError) as refused:
        _store().encode(request_, "")
    assert f"'http://h/x' cannot be stored in Redis: {where} is not JSON serializable (" in str(
        refused.value
    )


def test_an_item_loader_in_meta_is_refused_saying_what_to_pass_instead() -> None:
    """Scrapy's docs carry an ItemLoader to the next callback in meta: its requests were not
    stored, with an error that did not say what to do (an audit: 0 of 3 items)."""
    loader = ItemLoader(item={}, response=HtmlResponse("http://h/", body=b"<html></html>"))
    with pytest.raises(codec.UnserializableRequestError) as refused:
        _store().encode(Request("http://h/x", meta={"loader": loader}), "")
    said = str(refused.value)
    assert "meta key 'loader' is not JSON serializable" in said
    assert "travels to other nodes as JSON" in said
    assert "loader.load_item()" in said


class ItemRequest(Request):
    """A subclass whose ``__init__`` needs an argument its ``attributes`` do not name."""

    def __init__(self, url: str, item: dict[str, Any], **kwargs: Any) -> None:
        self.item = item
        super().__init__(url, **kwargs)


class DeclaredItemRequest(ItemRequest):
    attributes = (*Request.attributes, "item")


class NotedRequest(Request):
    """An attribute ``attributes`` does not name, with a default: dropped."""

    def __init__(self, *args: Any, note: str = "", **kwargs: Any) -> None:
        self.note = note
        super().__init__(*args, **kwargs)


def test_a_subclass_its_stored_fields_cannot_rebuild_is_refused_when_stored() -> None:
    """It was stored, and failed only on the node that leased it (decode/TypeError)."""
    local = type("LocalRequest", (Request,), {})  # not found by its module and name
    for request, why in [
        (ItemRequest("http://e.com/0", item={"k": 1}), "missing 1 required positional argument"),
        (local("http://e.com/0"), "doesn't define any object named 'LocalRequest'"),
    ]:
        with pytest.raises(codec.UnserializableRequestError) as refused:
            _store().encode(request, "")
        message = str(refused.value)
        cls = type(request)
        assert message.startswith(
            "request 'http://e.com/0' cannot be stored in Redis: its class "
            f"{cls.__module__}.{cls.__qualname__} cannot be rebuilt from what is stored"
        )
        assert why in message and "attributes" in message
    back = _round_trip(DeclaredItemRequest("http://e.com/0", item={"k": 1}))
    assert type(back) is DeclaredItemRequest and back.item == {"k": 1}
    noted = _round_trip(NotedRequest("http://e.com/0", note="kept?"))
    assert type(noted) is NotedRequest and noted.note == ""


def test_a_class_is_tried_once(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []

    def counted(fields: dict[str, Any], *, spider: Spider) -> Request:
        tried.append(fields["url"])
        return request_from_dict(fields, spider=spider)

    monkeypatch.setattr("crawler.frontier.request_store.request_from_dict", counted)
    store = _store()
    for page in range(3):
        store.encode(Request(f"http://e.com/{page}"), "")
        store.encode(FormRequest(f"http://e.com/f{page}", formdata={"q": "1"}), "")
    assert tried == ["http://e.com/0", "http://e.com/f0"]


def test_loads_rejects_non_objects() -> None:
    with pytest.raises(ValueError, match="not an object"):
        codec.loads(b"[1, 2]")


class SpiderWithErrback(PagesSpider):
    def failed(self, failure: Failure) -> None:
        """An errback, stored by name as the callback is."""


def _requests(spider: SpiderWithErrback) -> list[Request]:
    return [
        Request("http://h/p/17.html", callback=spider.parse, meta={"depth": 3}),
        Request("http://h/plain"),
        Request("http://h/x", method="POST", body=b"a=1", priority=-2, dont_filter=True),
        Request(
            "http://h/y",
            errback=spider.failed,
            cookies={"c": "1"},
            encoding="latin-1",
            flags=["f"],
            cb_kwargs={"k": 0},
            headers={"Referer": "http://h/"},
        ),
        FormRequest("http://h/form", formdata={"q": "中文"}),
        JsonRequest("http://h/json", data={"a": [1, 2]}),
    ]


def test_lean_storage_leaves_out_defaults_and_restores_them_exactly() -> None:
    spider = SpiderWithErrback()
    for request in _requests(spider):
        full = request.to_dict(spider=spider)
        lean = codec.dumps(full)
        assert len(codec.dumps(full, compress=False)) <= len(
            codec.dumps(full, lean=False, compress=False)
        )
        restored = request_from_dict(codec.loads(lean), spider=spider)
        assert restored.to_dict(spider=spider) == full, request
        assert type(restored) is type(request)
        old = request_from_dict(codec.loads(codec.dumps(full, lean=False)), spider=spider)
        assert old.to_dict(spider=spider) == full  # requests stored before read alike
        as_json = codec.dumps(full, compress=False)  # before compression, or with it off
        assert as_json == codec.plain(lean) and as_json.startswith(b"{")
        assert request_from_dict(codec.loads(as_json), spider=spider).to_dict(spider=spider) == full


class PostByDefault(Request):
    """A subclass whose ``__init__`` has a default of its own."""

    def __init__(self, url: str, method: str = "POST", **kwargs: Any) -> None:
        super().__init__(url, method=method, **kwargs)


class DetailRequest(Request):
    """Detail pages first: priority 1 unless given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("priority", 1)
        super().__init__(*args, **kwargs)


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(PostByDefault("http://e.com/0", method="GET"), id="POST-by-default-sent-GET"),
        pytest.param(DetailRequest("http://e.com/1").replace(priority=0), id="retried-priority"),
        pytest.param(XmlRpcRequest("http://e.com/2", params=(1,), dont_filter=False), id="XmlRpc"),
    ],
)
def test_a_subclass_with_defaults_of_its_own_comes_back_as_it_was(request_: Request) -> None:
    """A field at Request's default was left out and rebuilt with the subclass's own default
    (a GET came back POST, a retry's priority 0 came back 1, dont_filter=False came back True):
    a class not known to take Request's defaults keeps every field."""
    back = _round_trip(request_)
    assert type(back) is type(request_)
    assert back.to_dict() == request_.to_dict()


def test_a_subclass_stored_lean_before_decodes_as_it_did() -> None:
    earlier = b'{"url":"http://e.com/0","_class":"tests.test_codec.PostByDefault"}'
    assert _store().decode(Lease("l1", earlier)).method == "POST"


@pytest.mark.parametrize("cls", [Request, FormRequest, JsonRequest, XmlRpcRequest])
def test_the_classes_stored_lean_build_what_requests_defaults_build(cls: type[Request]) -> None:
    """A field may be left out only for a class whose ``__init__`` builds the same request
    without it as with Request's default (checked for this Scrapy version)."""
    name = None if cls is Request else f"{cls.__module__}.{cls.__name__}"
    same = all(
        cls("http://e.com/0").to_dict() == cls("http://e.com/0", **{field: default}).to_dict()
        for field, default in codec.LEAN_DEFAULTS.items()
    )
    assert (name in codec.LEAN_CLASSES) == same == (cls is not XmlRpcRequest)


class DateEncoder(json.JSONEncoder):
    """A JSON encoder of the project's own, for a JsonRequest's ``dumps_kwargs``."""

    def default(self, o: Any) -> Any:
        return o.isoformat() if isinstance(o, datetime.date) else super().default(o)


def test_a_json_requests_dumps_kwargs_keep_classes_and_functions_by_their_path() -> None:
    """``dumps_kwargs={"default": str}`` (or ``cls``) was refused, failing the page that yielded
    the request, where Scrapy sends it: its body is encoded already, and a later
    ``replace(data=...)`` encodes with them again."""
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    when = {"when": datetime.date(2024, 1, 2)}
    for options in ({"default": str, "indent": 2}, {"cls": DateEncoder}):
        request = JsonRequest("http://e.com/0", data=when, dumps_kwargs=options)
        back = store.decode(Lease("l1", store.encode(request, "").body))
        assert isinstance(back, JsonRequest)
        assert back.dumps_kwargs == {**options, "sort_keys": True}
        assert back.body == request.body
        assert back.replace(data=when).body == request.replace(data=when).body
    assert crawler.stats is not None and crawler.stats.get_stats() == {}


def test_a_stored_request_s_fingerprint_is_the_one_its_request_has() -> None:
    """What a node re-enqueues after Redis lost its data is recorded under the fingerprint a
    link to the same page gets ("" for one never deduplicated, or a body it cannot read)."""
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    page = Request("http://e.com/a?b=1&a=2", meta={"k": [1]})
    body = store.encode(page, store.fingerprint(page)).body
    assert store.stored_fingerprint(body) == store.fingerprint(Request("http://e.com/a?a=2&b=1"))
    again = Request("http://e.com/a", dont_filter=True)
    assert store.stored_fingerprint(store.encode(again, "").body) == ""
    assert store.stored_fingerprint(b'{"url": 5, "method": []}') == ""


def test_dumps_kwargs_that_cannot_be_named_are_left_out_counted_and_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    options = {"default": lambda value: f"<{value}>", "indent": 2}
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.request_store"):
        for page in range(2):
            request = JsonRequest(f"http://e.com/{page}", data={"a": 1}, dumps_kwargs=options)
            back = store.decode(Lease("l1", store.encode(request, "").body))
            assert isinstance(back, JsonRequest)
            assert back.dumps_kwargs == {"indent": 2, "sort_keys": True}
            assert back.body == request.body
    assert crawler.stats is not None
    assert crawler.stats.get_stats() == {"frontier/reshaped/dumps_kwargs": 2}
    assert len(caplog.records) == 1
    assert "dumps_kwargs 'default'" in caplog.text


def test_a_typical_link_is_stored_in_far_fewer_bytes() -> None:
    spider = PagesSpider()
    link = Request(
        "http://127.0.0.1:8000/p/17.html",
        callback=spider.parse,
        meta={"depth": 3, "crawler_scope": "127.0.0.1:8000"},
        headers={"Referer": "http://127.0.0.1:8000/p/8.html"},
    ).to_dict(spider=spider)
    lean = len(codec.dumps(link, compress=False))
    full = len(codec.dumps(link, lean=False, compress=False))
    assert lean < 0.7 * full, (lean, full)


def test_a_link_is_stored_compressed_in_about_half_its_json() -> None:
    """Links of a real site's shape (its host in the URL, the referring page's URL in the
    header): compressed, at most 60% of their lean JSON."""
    spider = PagesSpider()
    urls = [
        ("https://www.zhihu.com/question/752231581/answer/9598980006", "https://www.zhihu.com/"),
        (
            "https://shop.example.com/products/shoes/item-48213?color=red&ref=listing",
            "https://shop.example.com/products/shoes/",
        ),
        ("https://en.wikipedia.org/wiki/Web_crawler", "https://en.wikipedia.org/wiki/Scrapy"),
    ]
    for url, referer in urls:
        link = Request(
            url,
            callback=spider.parse,
            meta={"depth": 2, "crawler_scope": url.split("/")[2]},
            headers={"Referer": referer},
        ).to_dict(spider=spider)
        stored, as_json = codec.dumps(link), codec.dumps(link, compress=False)
        assert len(stored) <= 0.6 * len(as_json), (url, len(stored), len(as_json))
        assert codec.loads(stored) == codec.loads(as_json)


@pytest.mark.parametrize("cut", [1, 5])
def test_a_damaged_compressed_request_is_a_value_error(cut: int) -> None:
    stored = codec.dumps({"url": "https://www.example.com/a"})
    with pytest.raises(ValueError, match="compressed"):
        codec.loads(stored[:-cut])
    with pytest.raises(ValueError, match="compressed"):
        codec.loads(codec.COMPRESSED + b"\xff\xff" + stored[3:])


@dataclasses.dataclass
class Point:
    x: int


def test_meta_values_json_gives_back_as_another_type_are_counted_and_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    plain = Request("http://e.com/0", meta={"n": [1, "a", {"b": None}]}, cb_kwargs={"k": b"x"})
    store.encode(plain, "")
    assert crawler.stats is not None and crawler.stats.get_stats() == {}
    when = datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)
    reshaped = Request("http://e.com/1", meta={"pair": (1, when)}, cb_kwargs={"p": Point(1)})
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.request_store"):
        store.encode(reshaped, "")
        store.encode(reshaped.replace(url="http://e.com/2"), "")
    assert crawler.stats.get_stats() == {  # the dataclass comes back as itself (meta_objects)
        "frontier/reshaped/datetime": 2,
        "frontier/reshaped/tuple": 2,
    }
    assert len(caplog.records) == 2  # once per type
    assert "holds a tuple in its meta or cb_kwargs" in caplog.text


def test_a_crawl_spider_s_link_text_is_no_reshaped_value(caplog: pytest.LogCaptureFixture) -> None:
    """CrawlSpider puts a link's text in meta['link_text'] as lxml gives it (a str subclass):
    every CrawlSpider logged a warning that its meta held an _ElementUnicodeResult, which it
    gets back as the same str (an audit: noise no user can act on)."""
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    response = HtmlResponse("http://e.com/", body=b'<a href="/next">Next page</a>')
    (link,) = LinkExtractor().extract_links(response)
    assert type(link.text).__module__ == "lxml.etree"  # as lxml gives it
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.request_store"):
        back = store.decode(
            Lease("l1", store.encode(Request(link.url, meta={"link_text": link.text}), "").body)
        )
    assert back.meta["link_text"] == "Next page"
    assert crawler.stats is not None and crawler.stats.get_stats() == {}
    assert not caplog.records


def test_nan_and_infinity_come_back_as_they_were() -> None:
    """orjson writes them as null: the callback got None, with no word."""
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    values = {"nan": math.nan, "inf": math.inf, "minus": -math.inf, "in": [1.5, {-math.inf}]}
    request = Request("http://e.com/0", meta=values, cb_kwargs={"score": math.nan})
    back = store.decode(Lease("l1", store.encode(request, "").body))
    assert math.isnan(back.meta["nan"]) and math.isnan(back.cb_kwargs["score"])
    assert (back.meta["inf"], back.meta["minus"], back.meta["in"]) == (
        math.inf,
        -math.inf,
        [1.5, [-math.inf]],
    )
    assert crawler.stats is not None
    assert crawler.stats.get_stats() == {"frontier/reshaped/set": 1}


def test_dict_subclasses_come_back_as_dicts_counted_and_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An OrderedDict or defaultdict came back a dict with no word, unlike a tuple or a set."""
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    by_page = collections.defaultdict(list, {"1": [Point(1)]})  # an item in it: packed
    request = Request(
        "http://e.com/0",
        meta={"order": collections.OrderedDict(b=2, a=1)},
        cb_kwargs={"p": by_page},
    )
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.request_store"):
        for _ in range(2):
            back = store.decode(Lease("l1", store.encode(request, "").body))
    assert type(back.meta["order"]) is dict and list(back.meta["order"]) == ["b", "a"]
    assert type(back.cb_kwargs["p"]) is dict and back.cb_kwargs["p"] == {"1": [Point(1)]}
    assert crawler.stats is not None
    assert crawler.stats.get_stats() == {
        "frontier/reshaped/OrderedDict": 2,
        "frontier/reshaped/defaultdict": 2,
    }
    assert len(caplog.records) == 2
    assert "holds a defaultdict in its meta or cb_kwargs" in caplog.text


def test_scrapys_tuple_meta_keys_come_back_as_tuples_the_downloader_can_use() -> None:
    """``bindaddress`` (host, port) and a ``cookiejar`` key made of a tuple: JSON gives lists,
    which Scrapy's downloader and CookiesMiddleware cannot use (unhashable)."""
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    meta = {"bindaddress": ("127.0.0.1", 0), "cookiejar": ("account", 1), "other": (1, 2)}
    stored = store.encode(Request("http://e.com/0", meta=meta), "")
    back = store.decode(Lease("l1", stored.body)).meta
    assert (back["bindaddress"], back["cookiejar"], back["other"]) == (
        ("127.0.0.1", 0),
        ("account", 1),
        [1, 2],  # the user's own key: as JSON gives it, and counted
    )
    assert crawler.stats is not None
    assert crawler.stats.get_value("frontier/reshaped/tuple") == 1


def test_a_shared_sessions_cookie_header_is_never_stored() -> None:
    """A retry or redirect of a request that used a shared session copies the Cookie header the
    session middleware set (the session's secret cookies): stored, it would sit in Redis in
    plain text, outside CRAWLER_SESSION_KEY's encryption. The middleware builds it again."""
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    retry = Request(
        "http://e.com/0",
        headers={"Cookie": "mine=v1; sid=SECRET", "Accept": "text/html"},
        meta={"session_own_cookies": {"e.com": "mine=v1"}, "session_account": "alice"},
    )
    stored = store.encode(retry, "")
    assert b"SECRET" not in codec.plain(stored.body)
    back = store.decode(Lease("l1", stored.body))
    assert b"Cookie" not in back.headers
    assert back.headers[b"Accept"] == b"text/html"
    assert back.meta["session_own_cookies"] == {"e.com": "mine=v1"}
    plain = store.encode(Request("http://e.com/1", headers={"Cookie": "mine=v1"}), "")
    assert store.decode(Lease("l2", plain.body)).headers[b"Cookie"] == b"mine=v1"  # no session


def _store() -> RequestStore:
    crawler = get_crawler(Spider)
    return RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))


def _round_trip(request: Request) -> Request:
    store = _store()
    return store.decode(Lease("l1", store.encode(request, "").body))


USER_DICTS = [
    pytest.param({"$b": "QUJD"}, id="bytes-shaped-valid-base64"),
    pytest.param({"$b": "yes"}, id="bytes-shaped-invalid-base64"),
    pytest.param({"$b": "QUJD", "x": 1}, id="a-dollar-key-among-others"),
    pytest.param({"$dict": {"$b": "QUJD"}}, id="escape-shaped"),
    pytest.param({"$dict": 1, "$b": ["QUJD"]}, id="escape-and-bytes-keys"),
    pytest.param({"$dict": {"$dict": {"$dict": {}}}}, id="escape-shaped-nested"),
    pytest.param({"a": [{"b": {"$b": "QUJD"}}, [{"$dict": {"$b": ""}}]]}, id="nested-deep"),
    pytest.param({"$": None, "$$b": "QUJD", "$x": {}}, id="other-dollar-keys"),
    pytest.param({"$object": "json:JSONEncoder"}, id="object-shaped"),
    pytest.param({"$float": "nan"}, id="float-shaped"),
]


@pytest.mark.parametrize("value", USER_DICTS)
def test_a_users_dict_shaped_like_a_tag_comes_back_unchanged(value: dict[str, object]) -> None:
    """A dict of the user's own whose keys could be read as the codec's tags comes back as it
    was (Scrapy's own scheduler gives it back as is), wherever it is held; bytes still do."""
    request = Request(
        "http://e.com/0",
        meta={"q": value, "raw": b"\xff", "depth": 1},
        cb_kwargs={"k": value},
        cookies={"c": "1"},
    )
    back = _round_trip(request)
    assert back.meta == {"q": value, "raw": b"\xff", "depth": 1}
    assert back.cb_kwargs == {"k": value}
    assert back.cookies == {"c": "1"}


@pytest.mark.parametrize("value", USER_DICTS)
def test_a_meta_or_cb_kwargs_shaped_like_a_tag_comes_back_unchanged(
    value: dict[str, object],
) -> None:
    back = _round_trip(Request("http://e.com/0", meta=value, cb_kwargs=value))
    assert (back.meta, back.cb_kwargs) == (value, value)


@pytest.mark.parametrize("cookies", [{"$b": "QUJD"}, [{"name": "$b", "value": "QUJD"}]])
def test_cookies_named_like_a_tag_come_back_unchanged(cookies: CookiesT) -> None:
    assert _round_trip(Request("http://e.com/0", cookies=cookies)).cookies == cookies


def test_headers_named_like_a_tag_come_back_unchanged() -> None:
    """Header names are stored title-cased (``$B``, ``$Dict``), never as a tag."""
    headers = {"$b": "QUJD", "$dict": b"\xff"}
    back = _round_trip(Request("http://e.com/0", headers=headers))
    assert (back.headers.getlist("$b"), back.headers.getlist("$dict")) == ([b"QUJD"], [b"\xff"])


def test_only_a_request_with_a_dict_to_escape_is_stored_otherwise_than_before() -> None:
    """Without a dict whose keys all start with "$", the JSON is what earlier versions wrote;
    with one, that dict is wrapped and the request marked."""
    store = _store()
    typical = Request("http://e.com/0", meta={"depth": 1, "$b": "x"}, body=b"\xff")
    assert codec.plain(store.encode(typical, "").body) == (
        b'{"url":"http://e.com/0","body":{"$b":"/w=="},"meta":{"depth":1,"$b":"x"}}'
    )
    escaped = Request("http://e.com/0", meta={"depth": 1, "q": {"$b": "yes"}})
    assert codec.plain(store.encode(escaped, "").body) == (
        b'{"url":"http://e.com/0","meta":{"depth":1,"q":{"$dict":{"$b":"yes"}}},"$escapes":true}'
    )


@pytest.mark.parametrize("compress", [True, False])
def test_a_request_stored_by_an_earlier_version_decodes_as_it_did(compress: bool) -> None:
    """Bodies already in Redis survive an upgrade: one without the escapes' marker is read as
    before, a ``{"$dict": {...}}`` in it being the user's own dict."""
    earlier = (
        b'{"url":"http://e.com/0","body":{"$b":"/w=="},"headers":{"Referer":["http://e.com/"]},'
        b'"meta":{"depth":1,"q":{"$dict":{"a":1}},"raw":{"$b":"QUJD"}},'
        b'"cb_kwargs":{"k":{"$dict":{"$dict":2}}}}'
    )
    store = _store()
    back = store.decode(Lease("l1", codec.stored(earlier, compress)))
    assert back.body == b"\xff" and back.headers[b"Referer"] == b"http://e.com/"
    assert back.meta == {"depth": 1, "q": {"$dict": {"a": 1}}, "raw": b"ABC"}
    assert back.cb_kwargs == {"k": {"$dict": {"$dict": 2}}}


def test_an_unserializable_value_under_dollar_keys_is_named() -> None:
    request = Request("http://h/x", meta={"$fine": 1, "$socket": object()})
    store = _store()
    with pytest.raises(codec.UnserializableRequestError, match=r"meta key '\$socket'"):
        store.encode(request, "")


class Color(enum.IntEnum):
    RED = 1


class Kind(enum.StrEnum):
    PAGE = "page"


class Label(str):
    pass


def test_subclasses_of_plain_values_come_back_as_the_plain_value_counted() -> None:
    """An IntEnum came back an int, a str Enum or a str subclass a str, a bytearray bytes,
    with no stat and no warning, unlike a tuple or an Enum."""
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    values = {"c": Color.RED, "k": Kind.PAGE, "l": Label("x"), "b": bytearray(b"y"), "s": "z"}
    back = store.decode(Lease("l1", store.encode(Request("http://e.com/", meta=values), "").body))
    assert back.meta["c"] == 1 and type(back.meta["c"]) is int
    assert crawler.stats is not None
    assert crawler.stats.get_stats() == {
        "frontier/reshaped/Color": 1,
        "frontier/reshaped/Kind": 1,
        "frontier/reshaped/Label": 1,
        "frontier/reshaped/bytearray": 1,
    }


class OldVersion(Spider):
    name = "versions"

    def parse_detail(self, response: Any) -> None:
        return None


def test_a_request_the_spider_cannot_rebuild_fails_naming_why_and_its_url(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A redeploy renamed the callback a stored request names: its failure record had only
    ``decode/ValueError``, no error, and the log line named the lease, not the URL."""
    old = get_crawler(OldVersion)
    stored = RequestStore(old, OldVersion.from_crawler(old)).encode(
        Request("http://e.com/d/1", callback=OldVersion().parse_detail), ""
    )
    new = get_crawler(Spider)
    store = RequestStore(new, Spider.from_crawler(new, name="versions"))
    lease = Lease("l7", stored.body)
    with pytest.raises(DECODE_ERRORS) as raised:
        store.decode(lease)
    state = store.undecodable(lease, raised.value)
    assert (state.lease_id, state.failure) == ("l7", "decode/ValueError")
    assert state.error is not None and "parse_detail" in state.error
    assert "Leased request http://e.com/d/1 (lease l7) cannot be decoded" in caplog.text
    assert "parse_detail" in caplog.text
