"""A scrapy.Item handed to the next callback in meta or cb_kwargs, through the frontier's JSON."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson
import pytest
import scrapy
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler
from scrapy_playwright.page import PageMethod

from crawler.frontier import codec, meta_objects
from crawler.frontier.client import Lease
from crawler.frontier.request_store import RequestStore


class Product(scrapy.Item):
    name = scrapy.Field()
    seller = scrapy.Field()


class Seller(scrapy.Item):
    name = scrapy.Field()


def through_json(value: object) -> object:
    stored = orjson.dumps({"meta": meta_objects.pack(value)})
    return codec.loads(stored, tagged=meta_objects.restore)["meta"]


def test_items_come_back_as_their_classes_wherever_they_are_held() -> None:
    meta = {"item": Product(name="lamp", seller=Seller(name="ann")), "more": [Seller(name="bo")]}
    back = through_json(meta)
    assert isinstance(back, dict)
    assert type(back["item"]) is Product and type(back["item"]["seller"]) is Seller
    assert back["item"] == meta["item"] and back["more"] == [Seller(name="bo")]


def test_values_without_items_are_not_copied() -> None:
    meta = {"a": [1, 2], "b": {"c": (3,)}}
    assert meta_objects.pack(meta) is meta


def test_a_class_this_node_has_not_loaded_is_a_value_error_not_an_import() -> None:
    stored = {"$item": "some_module_never_imported:Thing", "$fields": {}}
    with pytest.raises(ValueError, match="some_module_never_imported:Thing item, a class this"):
        meta_objects.restore(stored)
    stored = {"$item": "builtins:dict", "$fields": {}}  # loaded, but not an item
    with pytest.raises(ValueError, match="a class this node has not loaded"):
        meta_objects.restore(stored)


def test_a_class_or_function_this_node_has_not_loaded_is_a_value_error() -> None:
    """A JsonRequest's ``dumps_kwargs`` names its ``cls`` or ``default`` by path."""
    assert meta_objects.restore({"$object": "json:JSONEncoder"}) is json.JSONEncoder
    with pytest.raises(ValueError, match="never_imported:encode, a class or function this"):
        meta_objects.restore({"$object": "never_imported:encode"})


def test_a_field_the_class_no_longer_declares_is_a_value_error() -> None:
    stored = meta_objects.pack(Product(name="lamp"))
    stored["$fields"]["colour"] = "red"
    with pytest.raises(ValueError, match="has no field 'colour'"):
        meta_objects.restore(stored)


@dataclasses.dataclass(frozen=True, slots=True)
class Offer:
    price: int
    seller: Seller
    seen: list[str] = dataclasses.field(init=False, default_factory=list)


def test_dataclass_items_come_back_as_their_class_with_every_field() -> None:
    offer = Offer(3, Seller(name="ann"))
    offer.seen.append("a")
    back = through_json({"offer": offer})
    assert isinstance(back, dict) and back["offer"] == offer
    assert type(back["offer"].seller) is Seller and back["offer"].seen == ["a"]


def test_a_dataclass_that_needs_a_field_it_was_not_stored_with_is_a_value_error() -> None:
    stored = meta_objects.pack(Offer(3, Seller()))
    del stored["$fields"]["price"]
    with pytest.raises(ValueError, match="does not fit it"):
        meta_objects.restore(stored)


def test_page_methods_come_back_with_their_arguments() -> None:
    methods = [PageMethod("wait_for_selector", "#out", timeout=5000), PageMethod("content")]
    back = through_json({"playwright_page_methods": methods})
    assert isinstance(back, dict)
    got = back["playwright_page_methods"]
    assert all(type(method) is PageMethod for method in got)
    assert [(m.method, m.args, m.kwargs) for m in got] == [
        ("wait_for_selector", ("#out",), {"timeout": 5000}),
        ("content", (), {}),
    ]


async def scroll_to_end(page: object) -> None:
    """A page method's function at a module's top level, as scrapy-playwright's README shows."""


async def init_page(page: object, request: object) -> None:
    """A ``playwright_page_init_callback`` at a module's top level."""


def test_a_page_method_calling_a_local_function_cannot_be_stored_and_says_why() -> None:
    async def scroll(page: object) -> None:
        return None

    with pytest.raises(TypeError, match="calling the function scroll, which cannot be stored"):
        meta_objects.pack({"playwright_page_methods": [PageMethod(scroll)]})


def test_functions_and_classes_at_a_module_s_top_level_come_back_as_themselves() -> None:
    """scrapy-playwright's own examples hand a function in meta (``playwright_page_init_callback``,
    ``PageMethod(scroll)``): such a request from ``start()`` was not stored and vanished with an
    ERROR, and the crawl then counted as finished. Found by its path like an item's class."""
    meta = {
        "playwright_page_init_callback": init_page,
        "playwright_page_methods": [PageMethod(scroll_to_end), PageMethod("content")],
        "encoder": json.JSONEncoder,
    }
    request = through_store(meta)
    assert request.meta["playwright_page_init_callback"] is init_page
    assert request.meta["encoder"] is json.JSONEncoder
    methods = request.meta["playwright_page_methods"]
    assert [type(method) for method in methods] == [PageMethod, PageMethod]
    assert [method.method for method in methods] == [scroll_to_end, "content"]
    assert request.cb_kwargs["again"]["playwright_page_init_callback"] is init_page


class Handlers(Spider):
    name = "handlers"

    async def on_response(self, response: object) -> None:
        return None


@pytest.mark.parametrize(
    ("value", "named"),
    [
        pytest.param(lambda page, request: None, "<lambda>", id="lambda"),
        pytest.param("method", "on_response", id="method"),
    ],
)
def test_a_function_no_path_finds_is_refused_saying_what_to_give(value: Any, named: str) -> None:
    crawler = get_crawler(Handlers)
    spider = Handlers.from_crawler(crawler)
    store = RequestStore(crawler, spider)
    handler = spider.on_response if value == "method" else value
    request = Request("http://e.com/0", meta={"playwright_page_event_handlers": {"r": handler}})
    with pytest.raises(codec.UnserializableRequestError) as refused:
        store.encode(request, "")
    message = str(refused.value)
    assert f"meta key 'playwright_page_event_handlers' holds the function {named}" in message
    assert "a module's top level" in message and "method's name" in message


def through_store(meta: dict[str, Any]) -> Request:
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    request = Request("http://e.com/0", meta=meta, cb_kwargs={"again": meta})
    return store.decode(Lease("l1", store.encode(request, "").body))


def test_a_users_dicts_shaped_like_an_item_or_a_page_method_come_back_as_dicts() -> None:
    item_shaped = {"$item": f"{__name__}:Product", "$fields": {"name": "lamp"}}
    method_shaped = {"$page_method": "click", "$args": ["#go"], "$kwargs": {}}
    meta = {"item": item_shaped, "method": method_shaped, "nested": [{"x": item_shaped}]}
    for value in (meta, item_shaped, method_shaped):
        back = through_store(value)
        assert (back.meta, back.cb_kwargs) == (value, {"again": value})


def test_items_and_page_methods_holding_such_dicts_come_back_as_themselves() -> None:
    tagged = {"$b": "QUJD"}
    meta = {
        "item": Product(name=tagged, seller=Seller(name={"$dict": tagged})),
        "playwright_page_methods": [PageMethod("evaluate", tagged, arg={"$kwargs": tagged})],
    }
    back = through_store(meta).meta
    assert type(back["item"]) is Product and back["item"] == meta["item"]
    [method] = back["playwright_page_methods"]
    assert (type(method), method.method, method.args, method.kwargs) == (
        PageMethod,
        "evaluate",
        (tagged,),
        {"arg": {"$kwargs": tagged}},
    )


def _tree() -> dict[str, Any]:
    """A tree with parent links: the leaf refers back to the dict that holds it."""
    root: dict[str, Any] = {"name": "root", "children": []}
    root["children"].append({"name": "leaf", "parent": root})
    return root


def _looped_list() -> list[Any]:
    looped: list[Any] = [1]
    looped.append([looped])
    return looped


def _looped_item() -> Product:
    product = Product(name="lamp")
    product["seller"] = {"of": [product]}
    return product


@pytest.mark.parametrize("field", ["meta", "cb_kwargs"])
@pytest.mark.parametrize(
    ("value", "what"),
    [
        pytest.param(_tree(), "dict", id="tree-with-parent-links"),
        pytest.param(_looped_list(), "list", id="list"),
        pytest.param(_looped_item(), "Product", id="item"),
    ],
)
def test_a_value_that_contains_itself_is_refused_naming_its_key(
    field: str, value: object, what: str
) -> None:
    """JSON cannot hold a cycle: packing one recursed until Python's RecursionError, which no
    one caught (the request was lost, its parent page counted done, a traceback logged)."""
    crawler = get_crawler(Spider)
    store = RequestStore(crawler, Spider.from_crawler(crawler, name="plain"))
    held: dict[str, Any] = {"depth": 1, "tree": value}
    url = "http://e.com/0"
    request = Request(url, meta=held) if field == "meta" else Request(url, cb_kwargs=held)
    with pytest.raises(
        codec.UnserializableRequestError,
        match=rf"'http://e.com/0'.*: {field} key 'tree' holds a {what} that contains itself",
    ):
        store.encode(request, "")


def test_a_value_held_twice_is_no_cycle() -> None:
    shared = {"name": "leaf"}
    meta = {"a": shared, "b": [shared, {"c": shared}]}
    assert through_store(meta).meta == meta


def test_values_nested_deeper_than_json_holds_are_refused_naming_their_key() -> None:
    """orjson writes at most 255 levels; packing 400 recursed into Python's RecursionError."""
    deep: list[Any] = []
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(codec.UnserializableRequestError, match="meta key 'deep' holds values"):
        through_store({"deep": deep})
