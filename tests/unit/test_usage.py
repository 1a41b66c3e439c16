"""Usage arithmetic the store cursor pages by (SPEC M6)."""

from __future__ import annotations

import pytest

from dovecote.broker.usage import Usage


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
