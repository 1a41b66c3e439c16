"""A queue's ranges by broker sequence, as the stream requests read and commit them
(broker/contents.py): every priority, whatever order the sequences lie in within one."""

from __future__ import annotations

from dovecote.broker.queue import Queue
from dovecote.core.destinations import queue
from dovecote.core.message import Message

Q = queue("ranges")
# (sequence, priority): out of order within priority 4 (a message put back, say).
HELD = [(1, 4), (2, 9), (5, 4), (3, 4), (4, 0), (7, 9), (6, 4), (8, 4)]


def filled() -> Queue:
    q = Queue(Q)
    for sequence, priority in HELD:
        q.enqueue(Message(f"m{sequence}", Q, priority=priority, sequence=sequence))
    return q


def test_a_range_is_every_pending_entry_in_it_whatever_its_place_in_sequence_order() -> None:
    q = filled()
    assert [e.message.sequence for e in q.pending_between(2, 6)] == [3, 4, 5, 6]
    assert q.pending_between(8, 100) == []
    assert q.pending_sequences() == list(range(1, 9))
    assert q.pending_sequences(2, 6) == [3, 4, 5, 6]
    assert q.pending_sequences(after=6) == [7, 8]


def test_removing_through_a_sequence_takes_exactly_those_and_keeps_the_order_of_the_rest() -> None:
    q = filled()
    removed = q.remove_pending_through(5)
    assert sorted(e.message.sequence for e in removed) == [1, 2, 3, 4, 5]
    # What is left is handed out as before: priority 9 first, each priority in its order.
    assert [e.message.sequence for e in q.pending_entries()] == [7, 6, 8]
    assert q.remove_pending_through(5) == []
    assert sorted(e.message.sequence for e in q.remove_pending_through(100)) == [6, 7, 8]
    assert list(q.pending_entries()) == []
