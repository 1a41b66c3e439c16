"""A synchronous send is answered as soon as the broker has stored the message, before the
message is dispatched (issue 33: the sender's next send need not wait for the dispatch; nor
does ActiveMQ's answer). Seen on a connection that also consumes from the queue: the
RECEIPT (STOMP) or Response (OpenWire) comes before the MESSAGE or MessageDispatch; the
dispatch used to come first."""

from __future__ import annotations

from brokers import BrokerProcess
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from rawopenwire import Peer, message, queue
from rawstomp import RawStomp


def test_a_stomp_sends_receipt_comes_before_its_dispatch(broker: BrokerProcess, name: str) -> None:
    raw = RawStomp(broker.stomp_address)
    raw.connect()
    raw.send(f"SUBSCRIBE\nid:1\ndestination:/queue/{name}\nreceipt:sub\n\n\x00".encode())
    assert raw.read_frame()[0] == "RECEIPT"
    for i in range(3):
        raw.send(
            f"SEND\ndestination:/queue/{name}\npersistent:true\nreceipt:r{i}\n\nm{i}\x00".encode()
        )
        first, second = raw.read_frame(), raw.read_frame()
        assert (first[0], first[1]["receipt-id"]) == ("RECEIPT", f"r{i}")
        assert (second[0], second[2]) == ("MESSAGE", f"m{i}".encode())
    raw.close()


def test_an_openwire_sync_sends_response_comes_before_its_dispatch(
    broker: BrokerProcess, name: str
) -> None:
    peer = Peer(broker.openwire_port)
    my = peer.handshake(f"ID:{name}")
    destination = queue(name)
    peer.send(Structure(t.CONSUMER_INFO, {
        "commandId": 3, "responseRequired": True, "consumerId": my["consumer"],
        "destination": destination, "prefetchSize": 10,
    }), Structure(t.PRODUCER_INFO, {
        "commandId": 4, "responseRequired": True, "producerId": my["producer"],
    }))  # fmt: skip
    assert [peer.until(t.RESPONSE)["correlationId"] for _ in range(2)] == [3, 4]
    for seq in range(1, 4):
        command_id = 10 + seq
        peer.send(message(my, destination, seq, command_id, persistent=True))
        first, second = peer.next(), peer.next()
        assert (first.type, first["correlationId"]) == (t.RESPONSE, command_id)
        assert second.type == t.MESSAGE_DISPATCH
        assert second["message"]["content"] == f"m{seq}".encode()
    peer.close()
