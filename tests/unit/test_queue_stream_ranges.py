"""A queue's ranges by broker sequence, as the stream requests read and commit them
(broker/contents.py): every priority, whatever order the sequences lie in within one. (A
queue whose buckets are in sequence order finds a range by bisection; one put out of order
by a late arrival, a page or a return is walked.)"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dovecote.broker.consumer import Consumer, Entry
from dovecote.broker.queue import Queue
from dovecote.core.commands import ConsumerInfo, MessageDispatch
from dovecote.core.destinations import queue
from dovecote.core.ids import ConnectionId, ConsumerId, SessionId
from dovecote.core.message import Message
from dovecote.store.api import QueuePage

Q = queue("ranges")


def make_consumer(
    n: int, prefetch: int = 10, selector: str | None = None
) -> tuple[Consumer, list[str]]:
    got: list[str] = []

    def sink(dispatch: MessageDispatch) -> None:
        assert dispatch.message is not None
        got.append(dispatch.message.message_id)

    info = ConsumerInfo(ConsumerId(SessionId(ConnectionId("ID:c"), 1), n), Q,
                        prefetch_size=prefetch, selector=selector)  # fmt: skip
    return Consumer(info, sink), got


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


def sequences_of(entries: list[Entry]) -> list[int]:
    return [e.message.sequence for e in entries]


def test_ranges_of_a_queue_in_order_are_cut_at_their_bounds_and_limits_across_priorities() -> None:
    q = Queue(Q)
    for sequence in range(1, 101):
        q.enqueue(Message(f"m{sequence}", Q, priority=9 if sequence % 10 == 0 else 4,
                          sequence=sequence))  # fmt: skip
    assert sequences_of(q.pending_between(25, 31)) == [26, 27, 28, 29, 30, 31]
    assert q.pending_sequences(after=5, limit=6) == [6, 7, 8, 9, 10, 11]
    assert q.pending_sequences(after=95, up_to=98, limit=10) == [96, 97, 98]
    assert q.pending_sequences(after=100) == []
    assert sorted(sequences_of(q.remove_pending_through(20))) == list(range(1, 21))
    assert q.pending_count == 80
    assert q.pending_sequences(limit=3) == [21, 22, 23]


def test_entries_put_back_out_of_order_after_the_queue_emptied_are_still_read_in_order() -> None:
    # 10 then 5 arrive (out of order), both go to a consumer; the queue is empty when 20
    # arrives; then the two come back ahead of it, still out of order.
    q = Queue(Q)
    for sequence in (10, 5):
        q.enqueue(Message(f"m{sequence}", Q, sequence=sequence))
    consumer, _ = make_consumer(1)
    q.add_consumer(consumer)
    q.dispatch(0)
    assert q.pending_count == 0
    q.enqueue(Message("m20", Q, sequence=20))
    q.requeue(q.remove_consumer(consumer))
    assert sequences_of(q.pending_between(0, 100)) == [5, 10, 20]
    assert q.pending_sequences(limit=2) == [5, 10]
    assert sequences_of(q.remove_pending_through(7)) == [5]
    assert sequences_of(list(q.pending_entries())) == [10, 20]


def test_an_entry_that_comes_back_between_waiting_ones_out_of_order_is_read_in_order() -> None:
    # 5 (blue) waits while 10 (red) goes to a consumer of red ones; 7 arrives, in order with
    # what waits; then 10 comes back into its place, between 5 and 7.
    q = Queue(Q)
    consumer, _ = make_consumer(1, selector="color = 'red'")
    q.add_consumer(consumer)
    for sequence, color in ((5, "blue"), (10, "red")):
        q.enqueue(Message(f"m{sequence}", Q, sequence=sequence, properties={"color": color}))
    q.dispatch(0)
    q.enqueue(Message("m7", Q, sequence=7, properties={"color": "blue"}))
    q.requeue(q.remove_consumer(consumer))
    assert [e.message_id for e in q.pending_entries()] == ["m5", "m10", "m7"]
    assert sequences_of(q.pending_between(6, 10)) == [7, 10]
    assert q.pending_sequences(after=5, limit=1) == [7]
    assert sequences_of(q.remove_pending_through(7)) == [5, 7]


def test_a_page_out_of_order_is_read_in_order() -> None:
    q = Queue(Q)
    q.enqueue(Message("m1", Q, sequence=1))
    q.take_page(QueuePage([Message(f"m{s}", Q, sequence=s) for s in (4, 2, 3)], (5, 0)))
    assert sequences_of(q.pending_between(1, 3)) == [2, 3]
    assert q.pending_sequences(after=1, limit=2) == [2, 3]
    assert sequences_of(q.remove_pending_through(2)) == [1, 2]


Step = tuple[str, int]


def in_flight(consumer: Consumer) -> set[int]:
    return {e.message.sequence for e in consumer.inflight.values()}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["send", "send", "send", "late", "dispatch", "return", "remove"]),
            st.integers(0, 9),
        ),
        max_size=60,
    )
)
def test_ranges_match_a_model_through_sends_late_sends_dispatch_returns_and_removals(
    steps: list[Step],
) -> None:
    """Whatever the queue went through, its ranges are those of the sorted set of what it
    holds pending (a "late" send: a sequence below the newest, as a slow store write's)."""
    q = Queue(Q)
    # (It takes only red messages: the others wait, so some that come back are newer than
    # some that wait, and merge into place.)
    consumer, _ = make_consumer(1, prefetch=3, selector="color = 'red'")
    q.add_consumer(consumer)
    model: set[int] = set()
    top = 0
    for action, n in steps:
        if action in ("send", "late"):
            top += 10
            sequence = top if action == "send" else top - 10 - n
            if sequence in model or sequence in in_flight(consumer):
                continue
            color = "red" if n % 2 else "blue"
            q.enqueue(Message(f"m{sequence}", Q, priority=n % 3 + 3, sequence=sequence,
                              properties={"color": color}))  # fmt: skip
            model.add(sequence)
        elif action == "dispatch":
            q.dispatch(0)
            model -= in_flight(consumer)
        elif action == "return":
            back = q.remove_consumer(consumer)
            q.requeue(back)
            model |= set(sequences_of(back))
            q.add_consumer(consumer)
        else:
            up_to = top - 10 * n
            removed = sequences_of(q.remove_pending_through(up_to))
            assert sorted(removed) == sorted(s for s in model if s <= up_to)
            model -= set(removed)
        held = sorted(model)
        after, up_to = top - 10 * n - 5, top - 5 * n
        assert sequences_of(q.pending_between(after, up_to)) == [
            s for s in held if after < s <= up_to
        ]
        assert q.pending_sequences(after=after, limit=n) == (
            [s for s in held if s > after][:n] if n else [s for s in held if s > after]
        )
