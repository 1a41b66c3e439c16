"""Destination policies' prefetch sizes (ActiveMQ's policyEntry queuePrefetch,
queueBrowserPrefetch, topicPrefetch, durableTopicPrefetch): a consumer that asked for its
client's default gets the policy's size, one that asked for another size keeps it. The
durable case with the defaults (the Java client's 1000 becomes 100) is compared with
ActiveMQ in tests/differential/test_advisories.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers import running_broker
from dovecote.broker.policy import DestinationPolicy
from dovecote.config import load_config
from dovecote.core.commands import ConsumerInfo
from dovecote.core.destinations import queue, topic
from dovecote.core.ids import ConnectionId, ConsumerId, SessionId
from stompclient import Client

CONSUMER = ConsumerId(SessionId(ConnectionId("ID:prefetch-test"), 1), 1)


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (ConsumerInfo(CONSUMER, queue("q")), 10),
        (ConsumerInfo(CONSUMER, queue("q"), prefetch_size=5), 5),
        (ConsumerInfo(CONSUMER, queue("q"), prefetch_size=500, browser=True), 20),
        (ConsumerInfo(CONSUMER, topic("t"), prefetch_size=32766), 30),
        (ConsumerInfo(CONSUMER, topic("t"), prefetch_size=100, subscription_name="s"), 40),
        (ConsumerInfo(CONSUMER, topic("t"), prefetch_size=1000, subscription_name="s"), 40),
        (ConsumerInfo(CONSUMER, topic("t"), prefetch_size=7, subscription_name="s"), 7),
    ],
)
def test_a_default_prefetch_becomes_the_policys(info: ConsumerInfo, expected: int) -> None:
    policy = DestinationPolicy(
        queue_prefetch=10, queue_browser_prefetch=20, topic_prefetch=30, durable_topic_prefetch=40
    )
    assert policy.configure_prefetch(info).prefetch_size == expected


def test_the_defaults_change_only_the_java_clients_durable_1000() -> None:
    policy = DestinationPolicy()
    durable = ConsumerInfo(CONSUMER, topic("t"), prefetch_size=1000, subscription_name="s")
    assert policy.configure_prefetch(durable).prefetch_size == 100
    plain = ConsumerInfo(CONSUMER, queue("q"))
    assert policy.configure_prefetch(plain) is plain


def test_a_policy_entry_in_the_file_sets_the_prefetch(tmp_path: Path) -> None:
    path = tmp_path / "dovecote.toml"
    path.write_text("[[policy.entries]]\npattern = 'slow.>'\nqueue_prefetch = 2\n")
    (entry,) = load_config(path).policy.entries
    assert entry.to_policy().queue_prefetch == 2


def test_a_stomp_consumer_on_a_queue_gets_the_policys_prefetch(tmp_path: Path) -> None:
    config = "[[policy.entries]]\npattern = 'slow.>'\nqueue_prefetch = 2\n"
    with running_broker(config, workdir=tmp_path) as broker:
        client = Client(broker.stomp_address)
        try:
            for n in range(5):
                client.send("/queue/slow.orders", f"m{n}")
                client.send("/queue/fast.orders", f"m{n}")
            client.subscribe("/queue/slow.orders", ack="client-individual")
            first = client.receive_n(2)
            assert client.nothing_more()  # two in flight: the policy's window is full
            client.ack(first[0])
            assert client.receive().body == "m2"
            client.subscribe("/queue/fast.orders", ack="client-individual")
            assert len(client.receive_n(5)) == 5  # no entry: the default window of 1000
        finally:
            client.close()
