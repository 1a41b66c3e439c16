"""A slow non-durable subscriber's pending limit (compatibility D4) counts only what waits beyond
its prefetch window, as ActiveMQ's constantPendingMessageLimitStrategy does."""

from __future__ import annotations

from dovecote.broker.consumer import Consumer, Entry
from dovecote.broker.topic import TopicSubscription
from dovecote.core.commands import ConsumerInfo, MessageDispatch
from dovecote.core.destinations import topic
from dovecote.core.ids import ConnectionId, ConsumerId, SessionId
from dovecote.core.message import Message

T = topic("prices")


def subscriber(prefetch: int, limit: int) -> tuple[TopicSubscription, list[str]]:
    got: list[str] = []

    def sink(dispatch: MessageDispatch) -> None:
        assert dispatch.message is not None
        got.append(dispatch.message.message_id)

    info = ConsumerInfo(
        ConsumerId(SessionId(ConnectionId("ID:c"), 1), 1), T, prefetch_size=prefetch
    )
    return TopicSubscription(T, Consumer(info, sink), pending_limit=limit), got


def test_a_burst_offered_before_dispatch_fills_the_window_first() -> None:
    """A burst routed in one batch is offered whole before the dispatch pass: the window's
    worth at its head must survive (ActiveMQ's subscriber gets 0-4 first, then the newest)."""
    sub, got = subscriber(prefetch=5, limit=10)
    dropped = [sub.offer(Entry(Message(f"m{i}", T), i)) for i in range(1000)]
    assert sum(d is not None for d in dropped) == 1000 - 15
    sub.dispatch(0)
    assert got == [f"m{i}" for i in range(5)]
    assert [e.message_id for e in sub.pending] == [f"m{i}" for i in range(990, 1000)]


def test_a_full_window_leaves_the_limit_to_the_pending_list_alone() -> None:
    sub, got = subscriber(prefetch=2, limit=3)
    for i in range(2):
        sub.offer(Entry(Message(f"m{i}", T), i))
    sub.dispatch(0)
    for i in range(2, 10):
        sub.offer(Entry(Message(f"m{i}", T), i))
    assert got == ["m0", "m1"]
    assert [e.message_id for e in sub.pending] == ["m7", "m8", "m9"]


def test_no_limit_keeps_everything() -> None:
    sub, _ = subscriber(prefetch=2, limit=-1)
    assert all(sub.offer(Entry(Message(f"m{i}", T), i)) is None for i in range(50))
    assert len(sub.pending) == 50
