"""Items of the generic ``pages`` spider.

Every item class names its type in ``item_type`` (used in Kafka topic
templates, message keys and headers) and its ``schema_version``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar


@dataclass(slots=True)
class PageItem:
    item_type: ClassVar[str] = "page"
    schema_version: ClassVar[int] = 1

    url: str
    status: int
    title: str | None
    depth: int
    crawled_at: datetime
