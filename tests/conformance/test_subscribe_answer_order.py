"""A new consumer on a queue that holds messages hears its subscription answered (OpenWire's
Response to the ConsumerInfo, STOMP's RECEIPT for the SUBSCRIBE) before its first message,
on bare OpenWire and bare STOMP. (Before, dovecote dispatched the first messages during the
attach, ahead of the answer.) ActiveMQ 5.17 answers first too, mostly: its dispatch runs on
another thread, and about one run in six a message overtook the answer there, so this is
no side-by-side test."""

from __future__ import annotations

from brokers import BrokerProcess
from differ import Target
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from rawopenwire import Peer, message, queue
from rawstomp import RawStomp

MESSAGES = 3


def openwire_order(target: Target) -> list[str]:
    destination = queue(target.name)
    peer = Peer(target.openwire_port)
    try:
        my = peer.handshake(f"ID:answer-order-{target.name}",
                            client_id=f"answer-order-{target.name}", producer=True)  # fmt: skip
        for seq in range(1, MESSAGES + 1):
            peer.send(message(my, destination, seq, command_id=10 + seq, persistent=True))
            peer.until(t.RESPONSE)
        peer.send(Structure(t.CONSUMER_INFO, {
            "commandId": 100, "responseRequired": True, "consumerId": my["consumer"],
            "destination": destination, "prefetchSize": 10, "dispatchAsync": True,
        }))  # fmt: skip
        seen: list[str] = []
        while len(seen) < MESSAGES + 1:
            s = peer.next()
            if s.type == t.RESPONSE and s["correlationId"] == 100:
                seen.append("answer")
            elif s.type == t.MESSAGE_DISPATCH:
                seen.append("message")
        return seen
    finally:
        peer.close()


def stomp_order(target: Target) -> list[str]:
    client = RawStomp(target.stomp_address)
    try:
        client.connect()
        for n in range(MESSAGES):
            client.send(
                f"SEND\ndestination:/queue/{target.name}\nreceipt:s{n}\n\nm{n}\x00".encode()
            )
            assert client.read_frame()[0] == "RECEIPT"
        client.send(
            f"SUBSCRIBE\ndestination:/queue/{target.name}\nid:1\nreceipt:sub\n\n\x00".encode()
        )
        seen: list[str] = []
        while len(seen) < MESSAGES + 1:
            command, _, _ = client.read_frame()
            seen.append("answer" if command == "RECEIPT" else command.lower())
        return seen
    finally:
        client.close()


def _target(broker: BrokerProcess, name: str) -> Target:
    return Target("dovecote", broker.openwire_port, broker.stomp_port, name)


def test_an_openwire_consumer_is_answered_before_its_first_message(
    broker: BrokerProcess, name: str
) -> None:
    assert openwire_order(_target(broker, name)) == ["answer", "message", "message", "message"]


def test_a_stomp_subscription_is_receipted_before_its_first_message(
    broker: BrokerProcess, name: str
) -> None:
    assert stomp_order(_target(broker, name)) == ["answer", "message", "message", "message"]
