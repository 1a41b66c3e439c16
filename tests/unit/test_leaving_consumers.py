"""What comes back from a leaving consumer as delivered (counted) and what as only
prefetched (compatibility R1), by the last delivered sequence its RemoveInfo names, as ActiveMQ
reads it; and destination names with options, which ActiveMQ strips."""

from __future__ import annotations

import pytest

from dovecote.broker.consumer import Entry, handed_over
from dovecote.core.commands import LAST_DELIVERED_UNKNOWN, LAST_DELIVERED_UNSET
from dovecote.core.destinations import parse_destination, queue
from dovecote.core.errors import InvalidDestinationError
from dovecote.core.message import Message

Q = queue("q")


def entries(*seqs: int) -> list[Entry]:
    return [Entry(Message(f"m{seq}", Q), seq) for seq in seqs]


def seqs(found: list[Entry]) -> list[int]:
    return [e.seq for e in found]


@pytest.mark.parametrize(
    ("last", "seen", "unseen"),
    [
        (LAST_DELIVERED_UNKNOWN, [4, 5, 2, 6], []),  # a lost connection: all count
        (LAST_DELIVERED_UNSET, [], [4, 5, 2, 6]),  # the application saw nothing
        (5, [4, 5], [2, 6]),  # in dispatch order, up to the entry of that sequence
        (2, [4, 5, 2], [6]),  # a redelivered older one dispatched later
        (3, [], [4, 5, 2, 6]),  # no entry has it (acked already, or another queue's)
    ],
)
def test_a_queue_consumer_counts_what_was_dispatched_up_to_the_last_delivered(
    last: int, seen: list[int], unseen: list[int]
) -> None:
    found_seen, found_unseen = handed_over(entries(4, 5, 2, 6), last, queue=True)
    assert (seqs(found_seen), seqs(found_unseen)) == (seen, unseen)


@pytest.mark.parametrize(
    ("last", "seen", "unseen"),
    [
        (LAST_DELIVERED_UNKNOWN, [4, 5, 6], []),
        (LAST_DELIVERED_UNSET, [], [4, 5, 6]),
        (0, [4, 5, 6], []),
        (5, [4, 5], [6]),
        (3, [], [4, 5, 6]),
    ],
)
def test_a_durable_subscriber_counts_every_sequence_up_to_the_last_delivered(
    last: int, seen: list[int], unseen: list[int]
) -> None:
    found_seen, found_unseen = handed_over(entries(4, 5, 6), last, queue=False)
    assert (seqs(found_seen), seqs(found_unseen)) == (seen, unseen)


def test_options_after_a_question_mark_are_no_part_of_the_name() -> None:
    assert queue("orders?consumer.prefetchSize=0") == queue("orders")
    assert parse_destination("topic://prices?consumer.retroactive=true").name == "prices"
    assert hash(queue("orders?x=1")) == hash(queue("orders"))
    with pytest.raises(InvalidDestinationError):
        queue("?consumer.prefetchSize=0")
