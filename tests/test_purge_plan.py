"""The purge plan both purge commands share: what it asks, when it goes on, when it refuses."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from crawler.frontier.keys import frontier_parts
from crawler.frontier.purge import PurgePlan, PurgeSettings

PARTS = frontier_parts("pages", 1)
SETTINGS = PurgeSettings(
    queue_max=0, bootstrap="", backlog_template="{spider}-backlog", heartbeat_interval=5.0
)


def plan(
    *,
    live: Sequence[str] = (),
    forced: bool = False,
    present: Sequence[str] = (),
    topics: tuple[str, ...] = (),
) -> PurgePlan:
    return PurgePlan("pages", PARTS, list(live), forced, list(present), topics, SETTINGS)


def test_the_question_names_every_key_and_the_backlog_topic() -> None:
    both = plan(present=["{pages}:queue:count", "pages:start_urls"], topics=("pages-backlog",))
    assert both.question == (
        "Delete {pages}:queue:count, pages:start_urls and the Kafka backlog topic pages-backlog"
        " (if it exists)? Type the spider name to confirm: "
    )
    assert plan(topics=("pages-backlog",)).question == (
        "Delete the Kafka backlog topic pages-backlog (if it exists)? "
        "Type the spider name to confirm: "
    )
    assert plan(topics=("ran-backlog", "pages-backlog")).question == (
        "Delete the Kafka backlog topics ran-backlog and pages-backlog (if they exist)? "
        "Type the spider name to confirm: "
    )
    assert plan().question is None


def test_it_goes_on_only_when_the_spider_is_typed_or_yes_given_or_nothing_to_ask() -> None:
    asked: list[str] = []

    def answer(text: str) -> Callable[[str], str]:
        def ask(question: str) -> str:
            asked.append(question)
            return text

        return ask

    doomed = plan(present=["pages:start_urls"])
    assert doomed.confirmed(yes=False, ask=answer(" pages\n"))
    assert not doomed.confirmed(yes=False, ask=answer("yes"))
    assert len(asked) == 2
    assert doomed.confirmed(yes=True, ask=answer("no"))
    assert plan().confirmed(yes=False, ask=answer("no"))
    assert len(asked) == 2


@pytest.mark.parametrize(
    ("live", "force", "refused"),
    [([], False, False), (["n1"], True, False), (["n2", "n1"], False, True)],
)
def test_live_nodes_refuse_a_purge_unless_forced(
    live: list[str], force: bool, refused: bool
) -> None:
    why = plan(live=live, forced=force, present=["pages:start_urls"]).refusal
    assert (why is not None) == refused
    if why is not None:
        assert why.startswith(
            "2 nodes of 'pages' are live (n1, n2): stop them first, or pass --force"
        )
