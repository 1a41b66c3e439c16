"""Durable topic subscriptions (compatibility D1): a client id and a subscription name keep a
subscription, and what it matched, while no consumer is attached; stored so that a restart
keeps them too."""

from __future__ import annotations

from dovecote.broker.consumer import Consumer
from dovecote.broker.regions import Regions
from dovecote.broker.topic import TopicSubscription
from dovecote.core.destinations import Destination
from dovecote.core.errors import BrokerError, UnknownSubscriptionError
from dovecote.store.api import AddSubscription, DurableSubscription, RemoveSubscription


async def attach(regions: Regions, client_id: str, consumer: Consumer) -> TopicSubscription:
    """The durable subscription a consumer with a subscription name attaches to: its own
    from before, or a new one (a changed destination or selector makes a new one, as in
    ActiveMQ)."""
    info = consumer.info
    assert info.subscription_name is not None
    wanted = DurableSubscription(
        client_id, info.subscription_name, info.destination, info.selector, info.no_local
    )
    sub = regions.durables.get((client_id, info.subscription_name))
    if sub is not None and sub.consumer is not None:
        raise BrokerError(
            f"durable subscription {info.subscription_name!r} of {client_id!r} is already active"
        )
    if sub is not None and sub.durable != wanted:
        await remove(regions, client_id, info.subscription_name)
        sub = None
    if sub is None:
        sub = await create(regions, wanted)
    sub.consumer = consumer
    return sub


async def create(regions: Regions, durable: DurableSubscription) -> TopicSubscription:
    """Store a new durable subscription, then route to it."""
    await regions.store.write([AddSubscription(durable)])
    return regions.add_topic_subscription(TopicSubscription(durable.destination, durable=durable))


async def find_or_create(
    regions: Regions, client_id: str, name: str, destination: Destination, create_it: bool
) -> TopicSubscription | None:
    """A durable subscription by its key (made on ``destination`` when missing and
    ``create_it``); an error when it exists on another destination."""
    sub = regions.durables.get((client_id, name))
    if sub is None and create_it:
        sub = await create(regions, DurableSubscription(client_id, name, destination))
    if sub is not None and sub.destination != destination:
        raise BrokerError(f"subscription {name!r} of {client_id!r} is on {sub.destination}")
    return sub


async def remove(regions: Regions, client_id: str, name: str) -> Destination:
    """Remove an inactive durable subscription with what it holds (RemoveSubscriptionInfo);
    returns the topic it was on."""
    sub = regions.durables.get((client_id, name))
    if sub is None:
        raise UnknownSubscriptionError(f"no durable subscription {name!r} for {client_id!r}")
    if sub.consumer is not None:
        raise BrokerError(f"durable subscription {name!r} is in use")
    regions.drop_topic_subscription(sub)
    assert sub.durable is not None
    await regions.store.write([RemoveSubscription(sub.durable.destination, client_id, name)])
    return sub.durable.destination
