"""The store contract suite (compatibility M1-M4): every persistence adapter must pass it unchanged.

An adapter's test module subclasses ``StoreContract`` and provides two fixtures:
``store`` (a started adapter) and ``reopen`` (a function that stops the adapter and returns
a started one over the same data: the memory store returns itself, a disk store a new
instance, which is how recovery is checked).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from dovecote.core.destinations import Destination, queue, topic
from dovecote.core.message import BodyType, Message
from dovecote.store.api import (
    AckSubscription,
    AddMessage,
    AddSubscription,
    DurableSubscription,
    PersistenceAdapter,
    RemoveDestination,
    RemoveMessage,
    RemoveSubscription,
    UpdateRedelivery,
)

Reopen = Callable[[PersistenceAdapter], Awaitable[PersistenceAdapter]]

Q = queue("orders")
T = topic("prices")


def msg(i: int, destination: Destination = Q, **fields: object) -> Message:
    return Message(
        message_id=f"ID:p:1:1:{i}",
        destination=destination,
        body=f"body {i}".encode(),
        body_type=BodyType.TEXT,
        persistent=True,
        timestamp=1_700_000_000_000 + i,
        properties={"n": i, "s": "x", "f": 1.5, "b": True},
        **fields,  # type: ignore[arg-type]
    )


def sub(
    name: str = "s1", client_id: str = "c1", destination: Destination = T
) -> DurableSubscription:
    return DurableSubscription(client_id, name, destination, selector="n > 1", no_local=False)


class StoreContract:
    async def test_empty_store_recovers_nothing(self, store: PersistenceAdapter) -> None:
        state = store.recover()
        assert state.queues == {} and state.subscriptions == []

    async def test_queue_messages_recover_in_send_order_with_all_fields(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        messages = [msg(i, priority=i % 10, correlation_id=f"c{i}", group_id="g") for i in range(5)]
        for m in messages:
            await store.write([AddMessage(m)])
        store = await reopen(store)
        assert store.recover().queues[Q] == messages
        assert store.message_count(Q) == 5

    async def test_removed_messages_stay_removed(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        await store.write([AddMessage(msg(i)) for i in range(4)])
        await store.write(
            [RemoveMessage(Q, msg(1).message_id), RemoveMessage(Q, msg(3).message_id)]
        )
        store = await reopen(store)
        assert [m.message_id for m in store.recover().queues[Q]] == [
            msg(0).message_id,
            msg(2).message_id,
        ]

    async def test_a_write_takes_its_place_when_started(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        """A write nobody awaits yet (an unsynced removal) still comes before every write
        started after it: a message added, removed unawaited and added again under the same
        id (a producer's resend) is there once, not removed."""
        await store.write([AddMessage(msg(1))])
        removal = store.write([RemoveMessage(Q, msg(1).message_id)], sync=False, lazy=True)
        await store.write([AddMessage(msg(1, correlation_id="resent"))])
        await removal
        store = await reopen(store)
        assert [m.correlation_id for m in store.recover().queues[Q]] == ["resent"]

    async def test_unsynced_writes_complete_on_their_own(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        await store.write([AddMessage(msg(1)), AddMessage(msg(2))])
        await store.write([RemoveMessage(Q, msg(1).message_id)], sync=False, lazy=True)
        store = await reopen(store)
        assert [m.message_id for m in store.recover().queues[Q]] == [msg(2).message_id]

    async def test_redelivery_counter_survives(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        await store.write([AddMessage(msg(1))])
        await store.write([UpdateRedelivery(Q, msg(1).message_id, 3)])
        store = await reopen(store)
        assert store.recover().queues[Q][0].redelivery_counter == 3

    async def test_a_batch_applies_as_a_whole(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        await store.write(
            [AddMessage(msg(1)), AddMessage(msg(2)), RemoveMessage(Q, msg(1).message_id)]
        )
        store = await reopen(store)
        assert [m.message_id for m in store.recover().queues[Q]] == [msg(2).message_id]

    async def test_destinations_are_kept_apart(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        other = queue("other")
        await store.write([AddMessage(msg(1)), AddMessage(msg(2, other))])
        await store.write([RemoveDestination(other)])
        store = await reopen(store)
        state = store.recover()
        assert list(state.queues) == [Q] and store.message_count(other) == 0

    async def test_durable_subscription_keeps_unacked_topic_messages(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        await store.write([AddSubscription(sub())])
        await store.write([AddMessage(msg(i, T)) for i in range(3)])
        await store.write([AckSubscription(T, "c1", "s1", msg(0, T).message_id)])
        store = await reopen(store)
        (recovered,) = store.recover().subscriptions
        assert recovered.subscription == sub()
        assert [m.message_id for m in recovered.pending] == [
            msg(1, T).message_id,
            msg(2, T).message_id,
        ]

    async def test_topic_message_lives_until_every_subscription_acked_it(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        await store.write([AddSubscription(sub("a")), AddSubscription(sub("b"))])
        await store.write([AddMessage(msg(1, T))])
        await store.write([AckSubscription(T, "c1", "a", msg(1, T).message_id)])
        assert store.message_count(T) == 1
        await store.write([AckSubscription(T, "c1", "b", msg(1, T).message_id)])
        store = await reopen(store)
        assert store.message_count(T) == 0
        assert all(not s.pending for s in store.recover().subscriptions)

    async def test_topic_message_without_subscriptions_is_not_kept(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        await store.write([AddMessage(msg(1, T))])
        store = await reopen(store)
        assert store.message_count(T) == 0

    async def test_wildcard_subscription_gets_messages_of_matching_topics(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        wildcard = sub("w", destination=topic("prices.>"))
        await store.write([AddSubscription(wildcard)])
        await store.write(
            [AddMessage(msg(1, topic("prices.ibm"))), AddMessage(msg(2, topic("volume")))]
        )
        store = await reopen(store)
        (recovered,) = store.recover().subscriptions
        assert [m.message_id for m in recovered.pending] == [msg(1).message_id]

    async def test_removed_subscription_releases_its_messages(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        await store.write([AddSubscription(sub())])
        await store.write([AddMessage(msg(1, T))])
        await store.write([RemoveSubscription(T, "c1", "s1")])
        store = await reopen(store)
        assert store.recover().subscriptions == [] and store.message_count(T) == 0

    async def test_subscription_added_later_does_not_see_older_messages(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        await store.write([AddSubscription(sub("early"))])
        await store.write([AddMessage(msg(1, T))])
        await store.write([AddSubscription(sub("late"))])
        store = await reopen(store)
        pending = {s.subscription.name: len(s.pending) for s in store.recover().subscriptions}
        assert pending == {"early": 1, "late": 0}

    async def test_checkpoint_changes_nothing_visible(
        self, store: PersistenceAdapter, reopen: Reopen
    ) -> None:
        await store.write([AddMessage(msg(i)) for i in range(3)])
        store.checkpoint()
        store = await reopen(store)
        assert len(store.recover().queues[Q]) == 3
