"""Settings read as the user gave them: a whole number where one is meant, a list where one is
meant, or a refusal naming the setting and the value as given (never a value rounded down or
a traceback naming nothing)."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.settings import Settings

from crawler.politeness.settings import PolitenessSettings
from crawler.settings_values import get_int, get_list
from settings import base


@pytest.mark.parametrize(("given", "read"), [(3, 3), ("3", 3), (" 4 ", 4), (2.0, 2), ("2.0", 2)])
def test_a_whole_number_is_read_as_given(given: Any, read: int) -> None:
    assert get_int(Settings({"POLITENESS_BURST": given}), "POLITENESS_BURST") == read


@pytest.mark.parametrize("given", [2.7, "2.7", True, "abc", ""])
def test_a_fraction_or_a_bool_for_a_whole_number_is_refused_naming_it(given: Any) -> None:
    """custom_settings={"POLITENESS_BURST": 2.7} ran with a burst of 2 and True with 1 (an
    audit), where -s POLITENESS_BURST=1.5 was refused."""
    with pytest.raises(ValueError, match=rf"^POLITENESS_BURST={given!r} is not an integer$"):
        get_int(Settings({"POLITENESS_BURST": given}), "POLITENESS_BURST")


def politeness(**given: Any) -> PolitenessSettings:
    settings = Settings({k: v for k, v in vars(base).items() if k.isupper()})
    settings.setdict(given, priority="cmdline")
    return PolitenessSettings.from_settings(settings)


@pytest.mark.parametrize(
    ("name", "given"),
    [
        ("POLITENESS_RATE", '{"rate": 2, "burst": 2.5}'),
        ("POLITENESS_RATE", {"rate": 2, "burst": True}),
        ("POLITENESS_SITE_RATES", {"shop.test": {"rate": 1, "burst": 1.9}}),
        ("POLITENESS_PENALTY_STATUSES", "[429.5]"),
        ("POLITENESS_PENALTY_STATUSES", [503, 429.5]),
    ],
)
def test_a_fraction_inside_a_rate_or_a_status_list_is_refused(name: str, given: Any) -> None:
    """Rounded down without a word: a burst of 2 for 2.5, 1 for true, status 429 for 429.5."""
    with pytest.raises(ValueError, match=name):
        politeness(**{name: given})


def test_whole_numbers_inside_rates_and_statuses_hold() -> None:
    read = politeness(
        POLITENESS_RATE='{"rate": 2, "burst": 3.0}', POLITENESS_PENALTY_STATUSES="[429, 503.0]"
    )
    assert (read.default.burst, read.penalty_statuses) == (3, frozenset({429, 503}))


@pytest.mark.parametrize("given", [[429, 503], (429, 503), {429, 503}, frozenset({429, 503})])
def test_a_list_setting_takes_what_scrapy_s_getlist_takes(given: Any) -> None:
    read = get_list(Settings({"POLITENESS_PENALTY_STATUSES": given}), "POLITENESS_PENALTY_STATUSES")
    assert sorted(read) == [429, 503]


@pytest.mark.parametrize("given", [429, 1.5, True])
def test_a_list_setting_given_one_number_is_refused_naming_it(given: Any) -> None:
    """custom_settings={"POLITENESS_PENALTY_STATUSES": 429} ended the start with asyncio's
    'Task exception was never retrieved' and TypeError: 'int' object is not iterable."""
    with pytest.raises(ValueError, match=rf"^POLITENESS_PENALTY_STATUSES={given!r} must be a list"):
        get_list(Settings({"POLITENESS_PENALTY_STATUSES": given}), "POLITENESS_PENALTY_STATUSES")
