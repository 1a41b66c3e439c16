"""The queue's dispatch rules without sockets or a broker: windows, round robin, priority,
selectors, groups and exclusive consumers (compatibility C2, C8)."""

from __future__ import annotations

import sys

import pytest

from dovecote.broker.consumer import Consumer
from dovecote.broker.queue import Queue
from dovecote.core.commands import AckType, ConsumerInfo, MessageAck, MessageDispatch
from dovecote.core.destinations import queue
from dovecote.core.errors import BrokerError
from dovecote.core.ids import ConnectionId, ConsumerId, SessionId
from dovecote.core.message import Message
from dovecote.store.api import QueuePage

Q = queue("q")
SESSION = SessionId(ConnectionId("ID:c"), 1)


def make_consumer(n: int, prefetch: int = 10, **options: object) -> tuple[Consumer, list[str]]:
    got: list[str] = []

    def sink(dispatch: MessageDispatch) -> None:
        assert dispatch.message is not None
        got.append(dispatch.message.message_id)

    info = ConsumerInfo(ConsumerId(SESSION, n), Q, prefetch_size=prefetch, **options)  # type: ignore[arg-type]
    return Consumer(info, sink), got


def fill(q: Queue, count: int, **fields: object) -> None:
    for i in range(count):
        q.enqueue(Message(f"m{i}", Q, **fields))  # type: ignore[arg-type]


def test_window_bounds_what_is_in_flight() -> None:
    q = Queue(Q)
    c, got = make_consumer(1, prefetch=3)
    q.add_consumer(c)
    fill(q, 10)
    q.dispatch(0)
    assert got == ["m0", "m1", "m2"]
    c.settle([c.inflight["m0"]])
    q.dispatch(0)
    assert got == ["m0", "m1", "m2", "m3"]


def test_round_robin_across_consumers_with_room() -> None:
    q = Queue(Q)
    a, got_a = make_consumer(1)
    b, got_b = make_consumer(2)
    q.add_consumer(a)
    q.add_consumer(b)
    fill(q, 6)
    q.dispatch(0)
    assert got_a == ["m0", "m2", "m4"] and got_b == ["m1", "m3", "m5"]


def test_round_robin_holds_across_passes_of_one_message() -> None:
    """A producer sending one message at a time makes a pass per message: the turn goes on
    from where the last pass left it (ActiveMQ 10/10; a turn per pass gave 20/0)."""
    q = Queue(Q)
    a, got_a = make_consumer(1, prefetch=100)
    b, got_b = make_consumer(2, prefetch=100)
    q.add_consumer(a)
    q.add_consumer(b)
    for i in range(20):
        q.enqueue(Message(f"m{i}", Q))
        q.dispatch(0)
    assert len(got_a) == 10 and len(got_b) == 10
    assert got_a == [f"m{i}" for i in range(0, 20, 2)]


def test_new_groups_are_shared_out_in_turn_across_passes() -> None:
    q = Queue(Q)
    a, got_a = make_consumer(1, prefetch=100)
    b, got_b = make_consumer(2, prefetch=100)
    q.add_consumer(a)
    q.add_consumer(b)
    for i in range(8):
        q.enqueue(Message(f"m{i}", Q, group_id=f"g{i % 4}"))
        q.dispatch(0)
    assert got_a == ["m0", "m2", "m4", "m6"] and got_b == ["m1", "m3", "m5", "m7"]


def test_the_turn_keeps_higher_priority_consumers_first() -> None:
    q = Queue(Q)
    low, got_low = make_consumer(1, prefetch=2, priority=1)
    high_a, got_a = make_consumer(2, prefetch=2, priority=5)
    high_b, got_b = make_consumer(3, prefetch=2, priority=5)
    for c in (low, high_a, high_b):
        q.add_consumer(c)
    for i in range(6):
        q.enqueue(Message(f"m{i}", Q))
        q.dispatch(0)
    assert got_a == ["m0", "m2"] and got_b == ["m1", "m3"] and got_low == ["m4", "m5"]


def test_highest_priority_first_then_fifo() -> None:
    q = Queue(Q)
    for i, priority in enumerate([4, 9, 0, 9, 4]):
        q.enqueue(Message(f"m{i}", Q, priority=priority))
    c, got = make_consumer(1)
    q.add_consumer(c)
    q.dispatch(0)
    assert got == ["m1", "m3", "m0", "m4", "m2"]


def test_requeued_entries_return_to_their_place() -> None:
    q = Queue(Q)
    c, _ = make_consumer(1, prefetch=2)
    q.add_consumer(c)
    fill(q, 4)
    q.dispatch(0)
    returned = q.remove_consumer(c)
    q.requeue(returned)
    d, got_d = make_consumer(2)
    q.add_consumer(d)
    q.dispatch(0)
    assert got_d == ["m0", "m1", "m2", "m3"]


def test_requeued_entries_merge_into_place_across_priorities() -> None:
    q = Queue(Q)
    for i, priority in enumerate([4, 4, 9, 4, 4, 9]):
        q.enqueue(Message(f"m{i}", Q, priority=priority))
    c, _ = make_consumer(1, prefetch=10)
    q.add_consumer(c)
    q.dispatch(0)
    back = q.remove_consumer(c)  # m2 m5 m0 m1 m3 m4, in dispatch order
    # Some return while later messages wait: m1 and m4 interleave with m3 and m6.
    q.requeue([e for e in back if e.message_id in ("m4", "m1")])
    q.enqueue(Message("m6", Q, priority=4))
    q.requeue([e for e in back if e.message_id == "m3"])
    # ...and the others, given out of order, all older than what waits.
    q.requeue([e for e in reversed(back) if e.message_id in ("m5", "m2", "m0")])
    d, got = make_consumer(2, prefetch=10)
    q.add_consumer(d)
    q.dispatch(0)
    assert got == ["m2", "m5", "m0", "m1", "m3", "m4", "m6"]
    assert q.pending_count == 0


def test_selector_skips_to_a_matching_consumer_and_keeps_the_rest() -> None:
    q = Queue(Q)
    reds, got_reds = make_consumer(1, selector="color = 'red'")
    q.add_consumer(reds)
    q.enqueue(Message("blue", Q, properties={"color": "blue"}))
    q.enqueue(Message("red", Q, properties={"color": "red"}))
    q.dispatch(0)
    assert got_reds == ["red"]
    assert [e.message_id for e in q.pending_entries()] == ["blue"]


def test_group_sticks_to_its_first_consumer() -> None:
    q = Queue(Q)
    a, got_a = make_consumer(1)
    b, got_b = make_consumer(2)
    q.add_consumer(a)
    q.add_consumer(b)
    for i in range(4):
        q.enqueue(Message(f"x{i}", Q, group_id="X"))
        q.enqueue(Message(f"y{i}", Q, group_id="Y"))
    q.dispatch(0)
    assert got_a == ["x0", "x1", "x2", "x3"] and got_b == ["y0", "y1", "y2", "y3"]


def test_group_waits_for_its_busy_owner() -> None:
    q = Queue(Q)
    a, got_a = make_consumer(1, prefetch=1)
    b, got_b = make_consumer(2, prefetch=5)
    q.add_consumer(a)
    q.add_consumer(b)
    fill(q, 3, group_id="G")
    q.dispatch(0)
    assert got_a == ["m0"] and got_b == []


def test_group_moves_when_its_owner_leaves() -> None:
    q = Queue(Q)
    a, _ = make_consumer(1, prefetch=1)
    b, got_b = make_consumer(2)
    q.add_consumer(a)
    q.add_consumer(b)
    fill(q, 3, group_id="G")
    q.dispatch(0)
    q.requeue(q.remove_consumer(a))
    q.dispatch(0)
    assert got_b == ["m0", "m1", "m2"]


def test_exclusive_consumer_takes_all_while_present() -> None:
    q = Queue(Q)
    a, got_a = make_consumer(1)
    x, got_x = make_consumer(2, exclusive=True)
    q.add_consumer(a)
    q.add_consumer(x)
    fill(q, 3)
    q.dispatch(0)
    assert got_x == ["m0", "m1", "m2"] and got_a == []


def test_expired_messages_are_returned_not_dispatched() -> None:
    q = Queue(Q)
    c, got = make_consumer(1)
    q.add_consumer(c)
    q.enqueue(Message("old", Q, expiration=100))
    q.enqueue(Message("new", Q, expiration=0))
    done = q.dispatch(now_ms=200)
    assert got == ["new"] and [e.message_id for e in done.expired] == ["old"]


def test_auto_ack_consumer_settles_on_dispatch_a_window_at_a_time() -> None:
    """Auto-acked messages are settled as they are sent; the window then bounds those its
    connection has not yet handed to the socket (the broker resets it when told)."""
    q = Queue(Q)
    c, got = make_consumer(1, prefetch=2, auto_ack=True)
    q.add_consumer(c)
    fill(q, 5)
    done = q.dispatch(0)
    assert got == ["m0", "m1"]
    assert len(done.settled) == 2 and not c.inflight
    assert q.dispatch(0).settled == []  # nothing written yet: no room
    c.unwritten = 0  # the connection's socket took them (Broker.written)
    done = q.dispatch(0)
    assert got == ["m0", "m1", "m2", "m3"] and len(done.settled) == 2


def test_higher_priority_consumer_first_until_its_window_is_full() -> None:
    q = Queue(Q)
    low, got_low = make_consumer(1, prefetch=10)
    high, got_high = make_consumer(2, prefetch=3, priority=5)
    q.add_consumer(low)
    q.add_consumer(high)
    fill(q, 5)
    q.dispatch(0)
    assert got_high == ["m0", "m1", "m2"] and got_low == ["m3", "m4"]


def test_a_stored_backlog_counts_in_the_size_and_pages_in_from_where_it_stands() -> None:
    q = Queue(Q)
    held = [Message(f"s{i}", Q, body=b"xy", sequence=100 + i) for i in range(3)]
    for message in held:
        q.hold_stored(message)
    assert (q.stored, q.stored_bytes, q.stored_from) == (3, 3 * held[0].size, (100, 0))
    assert q.size() == 3 and q.pending_count == 0 and q.stats.enqueued == 3
    q.take_page(QueuePage(held[:2], (101, 8)))
    assert (q.stored, q.stored_bytes, q.stored_from) == (1, held[0].size, (101, 8))
    c, got = make_consumer(1)
    q.add_consumer(c)
    q.dispatch(0)
    assert got == ["s0", "s1"] and q.size() == 3
    q.take_page(QueuePage([], (101, 8)))  # the store had less than counted: forget the rest
    assert (q.stored, q.stored_bytes) == (0, 0)


def test_acks_one_at_a_time_keep_the_in_flight_map_compact() -> None:
    """A Java consumer acks each message: the in-flight map loses its oldest entry each
    time. A dict keeps deleted slots, which a cumulative ack's walk from the front steps
    over; the consumer makes it anew before they pile up, and the acks still cover what
    they should."""
    q = Queue(Q)
    c, got = make_consumer(1, prefetch=1000)
    q.add_consumer(c)
    fill(q, 1100)
    q.dispatch(0)
    full_size = sys.getsizeof(c.inflight)
    for n in range(1100):
        message_id = f"m{n}"
        if n >= 1000:
            q.dispatch(0)  # one more goes out for each settled
        ack = MessageAck(c.info.consumer_id, AckType.STANDARD, message_id)
        entries = c.acked_entries(ack)
        assert [e.message_id for e in entries] == [message_id]
        c.settle(entries)
        if n == 989:
            # Ten left in flight: the map is about their size, not the thousand's it held.
            left = [e.message_id for e in c.inflight.values()]
            assert left == [f"m{i}" for i in range(990, 1000)]
            assert sys.getsizeof(c.inflight) * 4 < full_size
    assert not c.inflight and len(got) == 1100


def _in_flight(count: int) -> Consumer:
    q = Queue(Q)
    c, _ = make_consumer(1, prefetch=100)
    q.add_consumer(c)
    fill(q, count)
    q.dispatch(0)
    return c


def test_a_standard_ack_covers_its_range_from_its_first_message() -> None:
    c = _in_flight(5)
    ack = MessageAck(c.info.consumer_id, AckType.STANDARD, "m3", first_message_id="m2",
                     message_count=2)  # fmt: skip
    assert [e.message_id for e in c.acked_entries(ack)] == ["m2", "m3"]


@pytest.mark.parametrize(
    ("first", "count", "reason"),
    [("m2", 1, r"expected message count \(1\) differs"), ("gone", 1, "no message gone")],
)
def test_an_ack_that_does_not_match_the_dispatched_acks_nothing(
    first: str, count: int, reason: str
) -> None:
    """As ActiveMQ (a client's ack from before a failover, say): refused, nothing acked."""
    c = _in_flight(5)
    ack = MessageAck(c.info.consumer_id, AckType.STANDARD, "m3", first_message_id=first,
                     message_count=count)  # fmt: skip
    with pytest.raises(BrokerError, match=reason):
        c.acked_entries(ack)
    assert len(c.inflight) == 5
