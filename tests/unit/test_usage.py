"""Usage arithmetic the store cursor pages by (compatibility M6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dovecote.broker.consumer import Entry, release_all
from dovecote.broker.usage import TempStore, Usage
from dovecote.core.destinations import parse_destination
from dovecote.core.message import Message

QUEUE = parse_destination("queue://q")


@pytest.mark.parametrize(
    ("parent_limit", "parent_used", "limit", "used", "room"),
    [
        (0, 0, 0, 0, None),  # no limits anywhere
        (0, 0, 1000, 100, 600),  # 70% of 1000 minus 100
        (0, 0, 1000, 900, -200),  # already past the mark
        (2000, 1300, 1000, 100, 100),  # the broker's room is the smaller
        (2000, 0, 0, 0, 1400),  # only the broker has a limit
    ],
)
def test_room_below_a_mark_is_the_least_along_the_chain(
    parent_limit: int, parent_used: int, limit: int, used: int, room: int | None
) -> None:
    broker = Usage("broker", parent_limit)
    destination = Usage("queue", limit, parent=broker)
    broker.charge(parent_used - used)  # the parent's own share beyond the child's
    destination.charge(used)
    assert destination.room_below(0.7) == room


@pytest.mark.parametrize(
    ("parent_limit", "parent_used", "limit", "used", "margin", "room"),
    [
        (0, 0, 0, 0, 10**9, True),  # no limits anywhere
        (0, 0, 1000, 100, 899, True),
        (0, 0, 1000, 100, 900, False),  # would reach the limit
        (2000, 1900, 1000, 100, 99, True),
        (2000, 1900, 1000, 100, 100, False),  # the broker's limit is the nearer
        (2000, 0, 0, 0, 2000, False),  # only the broker has a limit
    ],
)
def test_room_for_a_margin_is_checked_along_the_chain(
    parent_limit: int, parent_used: int, limit: int, used: int, margin: int, room: bool
) -> None:
    broker = Usage("broker", parent_limit)
    destination = Usage("queue", limit, parent=broker)
    broker.charge(parent_used - used)
    destination.charge(used)
    assert destination.has_room(margin) is room


def test_release_all_gives_back_each_entry_once_to_the_usages_it_was_charged_to(
    tmp_path: Path,
) -> None:
    """release_all gives back runs of entries in one amount; mixed runs, a spilled entry and
    an entry already released must still come out exact."""
    wakes: list[str] = []
    broker = Usage("broker", 0, on_release=lambda: wakes.append("woken"))
    queue_a = Usage("a", 0, parent=broker)
    queue_b = Usage("b", 0, parent=broker)
    temp = Usage("temp", 0, on_release=lambda: None)
    spill = TempStore(tmp_path / "tmp")

    def entry(usages: tuple[Usage, ...], size: int, spilled: bool = False) -> Entry:
        e = Entry(Message(message_id=f"ID:{size}", destination=QUEUE, body=b"x" * size), 0)
        e.charged = usages
        for usage in usages:
            usage.charge(e.size)
        if spilled:
            e.spill = (spill, spill.put(b"body"))
        return e

    entries = [
        entry((queue_a,), 10),
        entry((queue_a,), 20),
        entry((queue_b,), 30),
        entry((temp,), 40, spilled=True),
        entry((queue_a,), 50),
    ]
    gone = entry((queue_b,), 60)
    gone.release()
    assert (queue_a.used, queue_b.used, temp.used) == (
        sum(e.size for e in entries if e.charged == (queue_a,)),
        entries[2].size,
        entries[3].size,
    )
    release_all([*entries, gone])
    assert (broker.used, queue_a.used, queue_b.used, temp.used) == (0, 0, 0, 0)
    assert all(e.charged == () and e.spill is None for e in entries)
    assert wakes  # blocked producers hear of the room
    release_all(entries)  # twice: nothing more is given back
    assert (broker.used, queue_a.used, queue_b.used, temp.used) == (0, 0, 0, 0)
