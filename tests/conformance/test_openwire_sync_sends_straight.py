"""OpenWire synchronous sends (responseRequired) are read straight from their bytes, as the
plain asynchronous ones are (issue 33): each is answered by a Response to its own command
id, in order, also when several arrive in one read and whether the message is persistent
or not (a non-persistent send nobody waits for is batched; one that waits must not be), and
a send the broker refuses gets an ExceptionResponse to its command id, the connection going
on."""

from __future__ import annotations

from brokers import BrokerProcess
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from rawopenwire import Peer, message, queue


def test_pipelined_sync_sends_are_each_answered_in_order(broker: BrokerProcess, name: str) -> None:
    peer = Peer(broker.openwire_port)
    my = peer.handshake(f"ID:{name}")
    destination = queue(name)
    peer.send(Structure(t.PRODUCER_INFO, {"commandId": 3, "responseRequired": True,
                                          "producerId": my["producer"]}))  # fmt: skip
    assert peer.until(t.RESPONSE)["correlationId"] == 3
    sends = [message(my, destination, seq, 100 + seq, persistent=seq % 2 == 0)
             for seq in range(1, 9)]  # fmt: skip
    peer.send(*sends)  # one write: read together
    answers = [peer.next() for _ in sends]
    assert [(a.type, a["correlationId"]) for a in answers] == [
        (t.RESPONSE, 100 + seq) for seq in range(1, 9)
    ]
    peer.send(Structure(t.CONSUMER_INFO, {
        "commandId": 200, "responseRequired": False, "consumerId": my["consumer"],
        "destination": destination, "prefetchSize": 100,
    }))  # fmt: skip
    got = [peer.until(t.MESSAGE_DISPATCH)["message"]["content"] for _ in sends]
    assert got == [f"m{seq}".encode() for seq in range(1, 9)]
    peer.close()


def test_a_refused_sync_send_is_answered_with_an_exception_to_its_command_id(
    broker: BrokerProcess, name: str
) -> None:
    peer = Peer(broker.openwire_port)
    my = peer.handshake(f"ID:{name}")
    destination = queue(name)
    unknown = Structure(t.LOCAL_TRANSACTION_ID, {"connectionId": my["connection"], "value": 77})
    refused = message(my, destination, 1, 51, persistent=True)
    refused.fields["transactionId"] = unknown  # never begun
    peer.send(refused, message(my, destination, 2, 52, persistent=True))
    first, second = peer.next(), peer.next()
    assert (first.type, first["correlationId"]) == (t.EXCEPTION_RESPONSE, 51)
    assert "transaction" in first["exception"].message.lower()
    assert (second.type, second["correlationId"]) == (t.RESPONSE, 52)
    peer.close()
