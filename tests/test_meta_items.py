"""A scrapy.Item handed to the next callback in meta or cb_kwargs, through the frontier's JSON."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
import scrapy

from crawler.frontier import meta_items


class Product(scrapy.Item):
    name = scrapy.Field()
    seller = scrapy.Field()


class Seller(scrapy.Item):
    name = scrapy.Field()


def through_json(value: object) -> object:
    return meta_items.unpack(orjson.loads(orjson.dumps(meta_items.pack(value))))


def test_items_come_back_as_their_classes_wherever_they_are_held() -> None:
    meta = {"item": Product(name="lamp", seller=Seller(name="ann")), "more": [Seller(name="bo")]}
    back = through_json(meta)
    assert isinstance(back, dict)
    assert type(back["item"]) is Product and type(back["item"]["seller"]) is Seller
    assert back["item"] == meta["item"] and back["more"] == [Seller(name="bo")]


def test_values_without_items_are_not_copied() -> None:
    meta = {"a": [1, 2], "b": {"c": (3,)}}
    assert meta_items.pack(meta) is meta


def test_a_class_this_node_has_not_loaded_is_a_value_error_not_an_import() -> None:
    stored = {"$item": "some_module_never_imported:Thing", "$fields": {}}
    with pytest.raises(ValueError, match="some_module_never_imported:Thing item, a class this"):
        meta_items.unpack({"item": stored})
    stored = {"$item": "builtins:dict", "$fields": {}}  # loaded, but not an item
    with pytest.raises(ValueError, match="a class this node has not loaded"):
        meta_items.unpack(stored)


def test_a_field_the_class_no_longer_declares_is_a_value_error() -> None:
    stored = meta_items.pack(Product(name="lamp"))
    stored["$fields"]["colour"] = "red"
    with pytest.raises(ValueError, match="has no field 'colour'"):
        meta_items.unpack(stored)


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
    stored = meta_items.pack(Offer(3, Seller()))
    del stored["$fields"]["price"]
    with pytest.raises(ValueError, match="does not fit it"):
        meta_items.unpack(stored)
