"""The authorization map: which entries cover a destination (ActiveMQ's DestinationMap
rules), the union of their groups, the everyone group, temporary destinations."""

from __future__ import annotations

import pytest

from dovecote.broker.connection import Principal
from dovecote.broker.security.authorization import (
    AuthorizationEntry,
    AuthorizationMap,
    Right,
    Rights,
    pattern_covers,
    refusal_text,
)
from dovecote.core.destinations import Destination, DestinationType, queue, topic


@pytest.mark.parametrize(
    ("pattern", "name", "covers"),
    [
        (">", "A", True),
        (">", "A.B.C", True),
        ("A.>", "A.B", True),
        ("A.>", "A", True),  # as ActiveMQ: FOO.BAR matches the FOO.BAR.> entry
        ("A.>", "AB", False),
        ("A.*", "A.B", True),
        ("A.*", "A.B.C", False),
        ("A.*", "A", False),
        ("A.*.C", "A.B.C", True),
        ("A.B", "A.B", True),
        ("A.B", "A.C", False),
        # A wildcard subscription is covered by every entry it could reach.
        ("A.B", "A.>", True),
        ("A.B.C", "A.*.C", True),
        ("A", "A.>", False),
        ("B.>", "A.>", False),
        ("A.*", "A.>", True),
        ("A.B", "*.B", True),
        ("A.B", "*.C", False),
    ],
)
def test_which_entries_cover_a_destination(pattern: str, name: str, covers: bool) -> None:
    assert pattern_covers(pattern, name) is covers


ADMINS = frozenset({"admins"})
READERS = frozenset({"readers"})

MAP = AuthorizationMap(
    (
        AuthorizationEntry(">", True, Rights(ADMINS, ADMINS, ADMINS)),
        AuthorizationEntry("orders.>", True, Rights(READERS, frozenset({"writers"}))),
        AuthorizationEntry("news.>", False, Rights(frozenset({"*"}))),
    ),
    temporary=Rights(READERS, READERS, frozenset()),
)

alice = Principal("alice", ADMINS)
rita = Principal("rita", READERS)
walt = Principal("walt", frozenset({"writers"}))


def test_every_covering_entry_adds_its_groups() -> None:
    orders = queue("orders.new")
    assert MAP.groups(Right.READ, orders) == ADMINS | READERS
    assert MAP.allows(rita, Right.READ, orders)
    assert MAP.allows(alice, Right.READ, orders)
    assert not MAP.allows(walt, Right.READ, orders)
    assert MAP.allows(walt, Right.WRITE, orders)
    assert not MAP.allows(walt, Right.ADMIN, orders)
    assert not MAP.allows(rita, Right.READ, queue("billing"))


def test_queues_and_topics_have_entries_of_their_own_and_star_is_everyone() -> None:
    assert not MAP.allows(alice, Right.READ, topic("orders.new"))  # no topic entry covers it
    assert MAP.allows(walt, Right.READ, topic("news.today"))
    assert MAP.allows(Principal("nobody"), Right.READ, topic("news.today"))
    assert not MAP.allows(walt, Right.WRITE, topic("news.today"))


def test_temporary_destinations_take_the_temporary_entry() -> None:
    temp = Destination(DestinationType.TEMP_QUEUE, "ID:x-1:1:1")
    assert MAP.allows(rita, Right.READ, temp)
    assert not MAP.allows(alice, Right.READ, temp)  # the > queue entry does not apply
    assert not MAP.allows(rita, Right.ADMIN, temp)
    open_map = AuthorizationMap(MAP.entries)
    assert open_map.allows(walt, Right.ADMIN, temp)  # no entry: open to every user


def test_refusals_use_activemq_words() -> None:
    assert (
        refusal_text(walt, Right.WRITE, queue("Q"))
        == "User walt is not authorized to write to: queue://Q"
    )
    assert (
        refusal_text(walt, Right.READ, topic("T"))
        == "User walt is not authorized to read from: topic://T"
    )
    assert (
        refusal_text(walt, Right.ADMIN, queue("Q"))
        == "User walt is not authorized to create: queue://Q"
    )
