"""User spider middlewares ordered below the frontier's own, which would hide their work from it.

``LeaseOutputMiddleware`` must see a callback's output after every spider middleware (an item a
middleware below it drops holds its page's lease forever), and ``ClusterStartMiddleware`` must
see ``start()``'s after every one (what one below it adds runs on every node).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from scrapy.http import Response

from tests.test_scrapy_redis_compat import project

CLUSTER = {"REDIS_URL": "redis://h:1/0"}
HERE = "tests.test_component_orders."


class DropsItems:
    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        async for output in result:
            if not isinstance(output, dict):
                yield output


class AddsStart:
    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        yield {"from": "a middleware"}
        async for output in start:
            yield output


class BlocksResponses:
    """A ban or content filter: what its process_response raises must fail the lease."""

    def process_response(self, request: object, response: Response) -> Response:
        return response


class OnlyRequests:
    def process_request(self, request: object) -> None:
        return None


class OnlyInput:
    def process_spider_input(self, response: Response) -> None:
        return None


@pytest.mark.parametrize(
    ("middleware", "order", "message"),
    [
        ("DropsItems", 5, "DropsItems at 5, below LeaseOutputMiddleware at 10"),
        ("AddsStart", 15, "AddsStart at 15, below ClusterStartMiddleware at 20"),
        ("AddsStart", -3, "below ClusterStartMiddleware at 20"),
    ],
)
def test_a_spider_middleware_below_the_frontiers_own_is_refused(
    middleware: str, order: int, message: str
) -> None:
    with pytest.raises(ValueError, match=f"SPIDER_MIDDLEWARES puts .*{message}.* above 20"):
        project({**CLUSTER, "SPIDER_MIDDLEWARES": {HERE + middleware: order}})


def test_below_them_what_does_not_touch_output_or_start_is_accepted_and_standalone_all() -> None:
    project({**CLUSTER, "SPIDER_MIDDLEWARES": {HERE + "OnlyInput": 1, HERE + "DropsItems": 15}})
    project({"SPIDER_MIDDLEWARES": {HERE + "DropsItems": 1, HERE + "AddsStart": 1}})
    moved = "crawler.middlewares.lease_output.LeaseOutputMiddleware"
    project({**CLUSTER, "SPIDER_MIDDLEWARES": {moved: 2, HERE + "DropsItems": 5}})


class Tags:
    def process_item(self, item: dict[str, Any]) -> dict[str, Any]:
        return {**item, "tag": "late"}


KAFKA = {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}


def test_an_item_pipeline_after_the_kafka_pipeline_is_refused() -> None:
    with pytest.raises(ValueError, match=r"ITEM_PIPELINES puts .*Tags at 950, after KafkaPipeline"):
        project({**KAFKA, "ITEM_PIPELINES": {HERE + "Tags": 950}})
    project({**KAFKA, "ITEM_PIPELINES": {HERE + "Tags": 300}})
    moved = "crawler.pipelines.kafka.KafkaPipeline"
    project({**KAFKA, "ITEM_PIPELINES": {HERE + "Tags": 950, moved: 1000}})
    project({"ITEM_PIPELINES": {HERE + "Tags": 950}})  # no Kafka: the pipeline is off


def test_a_downloader_middleware_with_process_response_below_the_lease_one_is_refused() -> None:
    """Its process_response ran after LeaseFailureMiddleware's had given the request its own
    errback back: an IgnoreRequest it raised went past the lease (counted done, no record)."""
    with pytest.raises(
        ValueError,
        match=r"DOWNLOADER_MIDDLEWARES puts .*BlocksResponses at 1, below LeaseFailureMiddleware "
        r"at 10: .* above 10",
    ):
        project({**CLUSTER, "DOWNLOADER_MIDDLEWARES": {HERE + "BlocksResponses": 1}})
    project({**CLUSTER, "DOWNLOADER_MIDDLEWARES": {HERE + "OnlyRequests": 1}})
    project({**CLUSTER, "DOWNLOADER_MIDDLEWARES": {HERE + "BlocksResponses": 11}})
    project({"DOWNLOADER_MIDDLEWARES": {HERE + "BlocksResponses": 1}})  # standalone


LEASE_OUTPUT = "crawler.middlewares.lease_output.LeaseOutputMiddleware"
LEASE_FAILURES = "crawler.middlewares.lease_failures.LeaseFailureMiddleware"
KAFKA_PIPELINE = "crawler.pipelines.kafka.KafkaPipeline"


def test_at_the_same_order_scrapy_runs_them_as_listed_and_so_does_the_check() -> None:
    """Scrapy sorts components by order and keeps the given order among equal ones: a component
    at the frontier's or Kafka's own order, listed where it runs on the wrong side, is refused."""
    with pytest.raises(ValueError, match=r"Tags at 900, after KafkaPipeline at 900"):
        project({**KAFKA, "ITEM_PIPELINES": {KAFKA_PIPELINE: 900, HERE + "Tags": 900}})
    project({**KAFKA, "ITEM_PIPELINES": {HERE + "Tags": 900, KAFKA_PIPELINE: 900}})
    with pytest.raises(ValueError, match=r"BlocksResponses at 10, below LeaseFailureMiddleware"):
        project(
            {
                **CLUSTER,
                "DOWNLOADER_MIDDLEWARES": {HERE + "BlocksResponses": 10, LEASE_FAILURES: 10},
            }
        )
    project(
        {**CLUSTER, "DOWNLOADER_MIDDLEWARES": {LEASE_FAILURES: 10, HERE + "BlocksResponses": 10}}
    )
    with pytest.raises(ValueError, match=r"DropsItems at 10, below LeaseOutputMiddleware"):
        project({**CLUSTER, "SPIDER_MIDDLEWARES": {HERE + "DropsItems": 10, LEASE_OUTPUT: 10}})
    project({**CLUSTER, "SPIDER_MIDDLEWARES": {LEASE_OUTPUT: 10, HERE + "DropsItems": 10}})
