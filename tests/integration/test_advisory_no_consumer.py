"""ActiveMQ's sendAdvisoryIfNoConsumers policy flag, dovecote and ActiveMQ 5.17 side by side
with the same policy (on for noc.> queues and topics): a non-persistent message sent where
nobody consumes is copied, body and all, to ActiveMQ.Advisory.NoConsumer.Queue.X /
.Topic.X; a persistent one, one with a consumer, or one without the flag is not."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from activemq import running_activemq
from brokers import running_broker
from dovecote.core.destinations import queue, topic
from networks import consumer, quiet, receive, send

DOVECOTE_POLICY = "".join(
    f'[[policy.entries]]\npattern = "noc.>"\nqueues = {kind}\n'
    "send_advisory_if_no_consumers = true\n"
    for kind in ("true", "false")
)
ACTIVEMQ_POLICY = (
    '<policyEntry queue="noc.>" sendAdvisoryIfNoConsumers="true"/>'
    '<policyEntry topic="noc.>" sendAdvisoryIfNoConsumers="true"/>'
)


@contextmanager
def broker(kind: str, workdir: Path) -> Iterator[int]:
    """The OpenWire port of a broker of ``kind`` with the policy above."""
    if kind == "activemq":
        with running_activemq(policy_entries=ACTIVEMQ_POLICY) as amq:
            yield amq.openwire_port
    else:
        with running_broker(DOVECOTE_POLICY, workdir) as dovecote:
            yield dovecote.openwire_port


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_no_consumer_advisories_as_activemq(kind: str, tmp_path: Path) -> None:
    advisory = "ActiveMQ.Advisory.NoConsumer."
    with (
        broker(kind, tmp_path) as port,
        consumer(port, topic(f"{advisory}Queue.noc.q")) as on_queue,
        consumer(port, topic(f"{advisory}Topic.noc.t")) as on_topic,
        consumer(port, topic(f"{advisory}Queue.other.q")) as on_other,
    ):
        send(port, queue("noc.q"), ["nobody, non-persistent"], persistent=False)
        send(port, queue("noc.q"), ["nobody, persistent"])
        send(port, topic("noc.t"), ["nobody on the topic"], persistent=False)
        send(port, queue("other.q"), ["no flag"], persistent=False)
        with consumer(port, queue("noc.q")) as reader:
            assert len(receive(reader, 2)) == 2
            send(port, queue("noc.q"), ["with a consumer"], persistent=False)
            assert receive(reader, 1) == ["with a consumer"]
        assert receive(on_queue, 5, timeout=2.0) == ["nobody, non-persistent"]
        assert receive(on_topic, 5, timeout=1.0) == ["nobody on the topic"]
        assert quiet(on_other)
