"""Advisories side by side with ActiveMQ 5.17: what the unmodified Java client gets on the
advisory topics (tests/java/Advisories.java: topic, data structure and its key fields,
message type, delivery mode and properties) for connections, consumers on a queue and on a
topic, a durable subscription deleted, producers, destinations made and removed, temporary
destinations, an expired and a dead-lettered message; and the client's own advisory-based
features (DestinationSource, ConsumerEventSource). Each scenario's outcome on dovecote must
be ActiveMQ's."""

from __future__ import annotations

from pathlib import Path

import pytest

from differ import Peers, java_outcomes

SOURCE = Path(__file__).parent.parent / "java" / "Advisories.java"
ORIGIN = "originBrokerId, originBrokerName=localhost, originBrokerURL~true"
CONSUMER = "ConsumerInfo(queue://adv.cons.R selector={sel} sub=null prefetch=1000 noLocal=false)"
REMOVE = "RemoveInfo(ConsumerId) type=Advisory persistent=false"

EXPECTED = {
    "connection": (
        "ActiveMQ.Advisory.Connection ConnectionInfo(client=adv-conn-R user=null password=[])"
        f" type=Advisory persistent=false [{ORIGIN}]"
        " | ActiveMQ.Advisory.Connection RemoveInfo(ConnectionId) type=Advisory"
        f" persistent=false [{ORIGIN}]"
    ),
    "queue_consumers": (
        "replayed=[ActiveMQ.Advisory.Consumer.Queue.adv.cons.R "
        + CONSUMER.format(sel="x = 1")
        + f" type=Advisory persistent=false [consumerCount=1:Integer, {ORIGIN}]]"
        " live=[ActiveMQ.Advisory.Consumer.Queue.adv.cons.R "
        + CONSUMER.format(sel="null")
        + f" type=Advisory persistent=false [consumerCount=2:Integer, {ORIGIN}],"
        f" ActiveMQ.Advisory.Consumer.Queue.adv.cons.R {REMOVE}"
        f" [consumerCount=1:Integer, {ORIGIN}],"
        f" ActiveMQ.Advisory.Consumer.Queue.adv.cons.R {REMOVE}"
        f" [consumerCount=0:Integer, {ORIGIN}]]"
    ),
    "topic_consumers": None,  # as for a queue, on Consumer.Topic: compared only
    "producers": (
        "replayed=[ActiveMQ.Advisory.Producer.Queue.adv.prod.R ProducerInfo(queue://adv.prod.R)"
        f" type=Advisory persistent=false [{ORIGIN}, producerCount=1:Integer]]"
        " live=[ActiveMQ.Advisory.Producer.Queue.adv.prod.R ProducerInfo(queue://adv.prod.R)"
        f" type=Advisory persistent=false [{ORIGIN}, producerCount=2:Integer],"
        " ActiveMQ.Advisory.Producer.Queue.adv.prod.R RemoveInfo(ProducerId) type=Advisory"
        f" persistent=false [{ORIGIN}, producerCount=1:Integer],"
        " ActiveMQ.Advisory.Producer.Queue.adv.prod.R RemoveInfo(ProducerId) type=Advisory"
        f" persistent=false [{ORIGIN}, producerCount=0:Integer]]"
    ),
    # A durable subscription deleted: its consumer's watchers hear of it (network bridges
    # drop their durable demand on it); while inactive it still counts as a consumer.
    "durable_unsubscribe": (
        "ActiveMQ.Advisory.Consumer.Topic.adv.durable.R ConsumerInfo(topic://adv.durable.R"
        " selector=null sub=sub1 prefetch=100 noLocal=false) type=Advisory persistent=false"
        f" [consumerCount=1:Integer, {ORIGIN}] | ActiveMQ.Advisory.Consumer.Topic.adv.durable.R"
        f" RemoveInfo(ConsumerId) type=Advisory persistent=false [consumerCount=1:Integer,"
        f" {ORIGIN}] | ActiveMQ.Advisory.Consumer.Topic.adv.durable.R RemoveSubscriptionInfo("
        f"adv-durable-R/sub1) type=Advisory persistent=false [consumerCount=0:Integer, {ORIGIN}]"
    ),
    "destinations": (
        "replayed=[ActiveMQ.Advisory.Queue DestinationInfo(add queue://adv.dest.R.old)"
        f" type=Advisory persistent=false [{ORIGIN}]]"
        " live=[ActiveMQ.Advisory.Queue DestinationInfo(add queue://adv.dest.R.sent)"
        f" type=Advisory persistent=false [{ORIGIN}],"
        " ActiveMQ.Advisory.Topic DestinationInfo(add topic://adv.dest.R.consumed)"
        f" type=Advisory persistent=false [{ORIGIN}],"
        " ActiveMQ.Advisory.Queue DestinationInfo(add queue://adv.dest.R.produced)"
        f" type=Advisory persistent=false [{ORIGIN}],"
        " ActiveMQ.Advisory.Queue DestinationInfo(remove queue://adv.dest.R.sent)"
        f" type=Advisory persistent=false [{ORIGIN}]]"
    ),
    "temporary": " | ".join(
        f"ActiveMQ.Advisory.{kind} DestinationInfo({op} temp) type=Advisory persistent=false"
        f" [{ORIGIN}]"
        for kind, op in (
            ("TempQueue", "add"),
            ("TempTopic", "add"),
            ("TempQueue", "remove"),
            ("TempTopic", "remove"),
        )
    ),
    # An expired persistent message goes to the DLQ too: two advisories, each carrying the
    # message without its body; only the Expired one names it in orignalMessageId.
    "expired": (
        "received=false ActiveMQ.Advisory.Expired.Queue.adv.exp.R ActiveMQTextMessage("
        "queue://adv.exp.R run=true sameId=true body=null) type=Advisory persistent=false"
        f" [{ORIGIN}, orignalMessageId] | ActiveMQ.Advisory.MessageDLQd.Queue.adv.exp.R"
        " ActiveMQTextMessage(queue://adv.exp.R run=true sameId=false body=null)"
        f" type=Advisory persistent=false [{ORIGIN}]"
    ),
    "dead_lettered": (
        "received=true again=false ActiveMQ.Advisory.MessageDLQd.Queue.adv.dlq.R"
        " ActiveMQTextMessage(queue://adv.dlq.R run=true sameId=false body=null)"
        f" type=Advisory persistent=false [{ORIGIN}]"
    ),
    "destination_source": "listed=true temp=true gone=true",
    "consumer_events": "started:1,started:2,stopped:1,stopped:0",
}


@pytest.fixture(scope="module")
def observed(peers: Peers) -> dict[str, dict[str, str]]:
    return java_outcomes(SOURCE, peers)


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_the_java_client_gets_the_same_advisories(
    observed: dict[str, dict[str, str]], scenario: str
) -> None:
    activemq, dovecote = observed["activemq"].get(scenario), observed["dovecote"].get(scenario)
    assert dovecote == activemq, f"dovecote: {dovecote}\nActiveMQ: {activemq}"
    if EXPECTED[scenario] is not None:
        assert activemq == EXPECTED[scenario]
    assert "ERROR" not in (activemq or "")
