"""What the statistics plugin (ActiveMQ's statisticsBrokerPlugin) counts, side by side."""

from __future__ import annotations

from differ import Target
from dovecote.client import ConnectionFactory
from dovecote.core.destinations import topic
from networks import topic_statistics, url


def offline_durable_counts(target: Target) -> list[object]:
    """A durable subscription whose subscriber left still counts as a consumer of its
    topic, until it is deleted."""
    counts: list[object] = []
    with ConnectionFactory(url(target.openwire_port)).create_connection(
        client_id=f"stats-{target.name}"
    ) as connection:
        session = connection.create_session()
        subscriber = session.create_durable_subscriber(topic(target.name), "sub1")
        counts.append(topic_statistics(target.openwire_port, target.name).get("consumerCount"))
        subscriber.close()
        counts.append(topic_statistics(target.openwire_port, target.name).get("consumerCount"))
        session.unsubscribe("sub1")
        counts.append(topic_statistics(target.openwire_port, target.name).get("consumerCount"))
    return counts


def test_an_offline_durable_subscription_counts_as_a_consumer(differ) -> None:
    differ(offline_durable_counts, [1, 1, 0])
