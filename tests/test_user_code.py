"""Every guarantee with code that is not ours: a conformance matrix against standalone Scrapy.

Each cell: a 2-node cluster crawl (real Redis, real Kafka) of a local site by an
ordinary spider with an ordinary pipeline, compared with plain ``scrapy crawl`` of
the same site. Every cell must give the same set of items, fetch every page once,
leave no lease or queued request in Redis, close every node on idle, and have a
ledger that adds up (leased = done + failed + requeued + released).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.user_crawl import compare_with_standalone, pipelines

SPIDERS = ["u_start_urls", "u_start", "u_crawl", "u_sitemap", "u_redis", "u_redis_crawl"]
FEED_SPIDERS = ["u_xmlfeed", "u_csvfeed"]
PIPELINE_CASES = [
    "IdentityPipeline",
    "NewDictPipeline",
    "AsDictPipeline",
    "AsyncPipeline",
    "DropSomePipeline",
    "RaiseSomePipeline",
]
PAGES = 24


def check_cell(
    spider: str,
    pipeline_names: tuple[str, ...],
    tmp_path: Path,
    redis_url: str,
    kafka_bootstrap: str,
) -> None:
    result = compare_with_standalone(
        f"{spider} x {'+'.join(pipeline_names)}",
        spider,
        tmp_path,
        redis_url=redis_url,
        kafka_bootstrap=kafka_bootstrap,
        pages=PAGES,
        settings={"ITEM_PIPELINES": pipelines(*pipeline_names)},
    )
    assert sorted(result.run.items) == sorted(result.reference)  # also: none delivered twice
    assert result.hits == result.reference_hits
    if spider not in FEED_SPIDERS:
        assert result.hits == {f"/p/{i}.html": 1 for i in range(PAGES)}


def matrix() -> list[Any]:
    """Every spider with every pipeline; ``make test`` runs every pipeline with the plain
    spider and every spider with the pipeline returning a new dict, the rest are ``slow``."""
    return [
        pytest.param(
            spider,
            pipeline,
            marks=()
            if spider == "u_start_urls" or pipeline == "NewDictPipeline"
            else pytest.mark.slow,
        )
        for spider in SPIDERS
        for pipeline in PIPELINE_CASES
    ]


@pytest.mark.parametrize(("spider", "pipeline"), matrix())
def test_matrix_cell(
    spider: str, pipeline: str, tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    check_cell(spider, (pipeline,), tmp_path, redis_url, kafka_bootstrap)


@pytest.mark.parametrize("spider", FEED_SPIDERS)
def test_feed_spiders(spider: str, tmp_path: Path, redis_url: str, kafka_bootstrap: str) -> None:
    """One feed response holds every item: one lease settles many items."""
    check_cell(spider, ("NewDictPipeline",), tmp_path, redis_url, kafka_bootstrap)


@pytest.mark.parametrize(
    "chain",
    [("DeferredPipeline",), ("OtherClassPipeline",), ("NewDictPipeline", "AsyncPipeline")],
)
def test_more_pipelines(
    chain: tuple[str, ...], tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    check_cell("u_start_urls", chain, tmp_path, redis_url, kafka_bootstrap)
