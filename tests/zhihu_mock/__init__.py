"""A local mock of Zhihu (pages, API v4, login, anti-bot rules) for crawler tests and demos.

``with ZhihuMock(MockConfig(...)) as mock:`` serves generated data on ``mock.base_url``;
``mock.data`` lists what exists and ``mock.counters`` what the site saw. See docs/zhihu-mock.md.
"""

from __future__ import annotations

from tests.zhihu_mock.config import (
    SIGNATURE_VERSION,
    DataConfig,
    MockConfig,
    QuestionSpec,
    signature_format_ok,
)
from tests.zhihu_mock.counters import MockCounters
from tests.zhihu_mock.data import generate
from tests.zhihu_mock.records import MockData
from tests.zhihu_mock.server import ZhihuMock
from tests.zhihu_mock.variety import Variety

__all__ = [
    "SIGNATURE_VERSION",
    "DataConfig",
    "MockConfig",
    "MockCounters",
    "MockData",
    "QuestionSpec",
    "Variety",
    "ZhihuMock",
    "generate",
    "signature_format_ok",
]
