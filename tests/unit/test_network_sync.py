"""syncDurableSubs pieces (network/sync.py): the BrokerSubscriptionInfo codec (OpenWire v12
type 92) reads back what it wrote, laid out as ActiveMQ's v12 marshaller lays it out; who
asks for it and what is sent back."""

from __future__ import annotations

from dovecote.core.destinations import queue, topic
from dovecote.network.settings import DestinationPattern
from dovecote.network.sync import is_own_network_subscription, subscription_info, sync_asked
from dovecote.protocol.openwire import Marshaller, Structure
from dovecote.protocol.openwire import schema as t


class Views:
    """What BrokerQuery.durable_subscriptions gives, for three subscriptions."""

    def durable_subscriptions(self) -> list[object]:
        from dovecote.broker.query import DurableView

        return [
            DurableView("watcher", "w", topic("net.sync.a"), "x > 1", False, 3),
            DurableView("other", "o", topic("elsewhere"), None, True, 0),
            DurableView(
                "a-b_B_inbound_C", "NC-DS_B_net.sync.a", topic("net.sync.a"), None, True, 0
            ),
        ]


def test_a_broker_subscription_info_reads_back_as_written() -> None:
    consumer = Structure(t.CONSUMER_INFO, {
        "consumerId": Structure(t.CONSUMER_ID, {"connectionId": "c", "sessionId": 0, "value": 1}),
        "destination": Structure(t.TOPIC, {"physicalName": "x"}), "clientId": "w",
        "subscriptionName": "s",
    })  # fmt: skip
    info = Structure(t.BROKER_SUBSCRIPTION_INFO, {
        "commandId": 3, "brokerId": Structure(t.BROKER_ID, {"value": "ID:B"}),
        "brokerName": "B", "subscriptionInfos": [consumer, None],
    })  # fmt: skip
    marshaller = Marshaller(version=12)
    frame = marshaller.frame(info)
    back = marshaller.parse_body(frame[4:])
    assert back.type == t.BROKER_SUBSCRIPTION_INFO
    assert back["brokerId"]["value"] == "ID:B" and back["brokerName"] == "B"
    (first, second) = back["subscriptionInfos"]
    assert second is None
    assert (first["clientId"], first["subscriptionName"]) == ("w", "s")
    # BaseCommand's head, then brokerId (nested), brokerName (string) and the array of
    # ConsumerInfos (a flag, a 16-bit count, each nested), as ActiveMQ's loose marshaller.
    body = frame[4:]
    assert body[:6] == bytes([92, 0, 0, 0, 3, 0])
    assert body[6:9] == bytes([1, t.BROKER_ID, 1])  # not null, BrokerId, its value not null
    after_id = 9 + 2 + len("ID:B")
    assert body[after_id : after_id + 4] == b"\x01\x00\x01B"
    assert body[after_id + 4 : after_id + 7] == b"\x01\x00\x02"
    assert body[after_id + 7 : after_id + 9] == bytes([1, t.CONSUMER_INFO])
    assert body[-1] == 0  # the null element


def test_only_a_bridge_that_asks_is_answered_with_its_included_destinations() -> None:
    properties = (
        "syncDurableSubs=true\ndynamicallyIncludedDestinations=[topic://net.sync.>, queue://q]"
    )
    asked = Structure(t.BROKER_INFO, {"networkConnection": True, "networkProperties": properties})
    assert sync_asked(asked) == (
        DestinationPattern("net.sync.>", False),
        DestinationPattern("q", True),
    )
    off = "syncDurableSubs=false\n"
    not_asked = Structure(t.BROKER_INFO, {"networkConnection": True, "networkProperties": off})
    assert sync_asked(not_asked) is None
    assert (
        sync_asked(Structure(t.BROKER_INFO, {"networkProperties": "syncDurableSubs=true"})) is None
    )


def test_the_answer_lists_the_included_durable_subscriptions_but_network_ones() -> None:
    info = subscription_info(Views(), "B", (DestinationPattern("net.sync.>", False),))  # type: ignore[arg-type]
    assert info["brokerName"] == "B"
    (only,) = info["subscriptionInfos"]
    assert (only["clientId"], only["subscriptionName"], only["selector"]) == (
        "watcher",
        "w",
        "x > 1",
    )
    assert only["destination"] == Structure(t.TOPIC, {"physicalName": "net.sync.a"})
    nothing = subscription_info(Views(), "B", ())  # type: ignore[arg-type]
    assert nothing["subscriptionInfos"] == []  # as ActiveMQ: no included list, nothing
    assert queue("q")  # (queues have no durable subscriptions)


def test_a_bridges_own_network_subscription_is_not_remote_demand() -> None:
    own = Structure(
        t.CONSUMER_INFO, {"subscriptionName": "NC-DS_B_t", "clientId": "a-b_B_inbound_A"}
    )
    other = Structure(
        t.CONSUMER_INFO, {"subscriptionName": "NC-DS_C_t", "clientId": "c-b_C_inbound_B"}
    )
    plain = Structure(t.CONSUMER_INFO, {"subscriptionName": "w", "clientId": "a-b"})
    assert is_own_network_subscription(own, "a-b")
    assert not is_own_network_subscription(other, "a-b")
    assert not is_own_network_subscription(plain, "a-b")
