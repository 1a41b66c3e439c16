"""What a malformed OpenWire peer meets, on dovecote and on a real ActiveMQ 5.17: a command
read whole but wrong (a MessageAck with ackType -80) leaves the connection in step (the
next command is answered), and a frame that cannot be read (a string that is not modified
UTF-8) ends the connection. Where they differ, on purpose: dovecote answers the wrong
command with an ExceptionResponse naming it (ActiveMQ answers the ack of an unknown
consumer with a plain Response), and tells the unreadable frame's command id why before
closing (ActiveMQ closes without a word)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from activemq import running_activemq
from brokers import running_broker
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from rawopenwire import MARSHALLER, Peer, bad_ack, client_wfi, ids, queue


@pytest.fixture(scope="module")
def ports() -> Iterator[dict[str, int]]:
    with running_activemq() as amq, running_broker() as dovecote:
        yield {"activemq": amq.openwire_port, "dovecote": dovecote.openwire_port}


def connected(port: int, name: str) -> tuple[Peer, dict[str, Structure]]:
    """A connection past its ConnectionInfo (with a client id, which ActiveMQ requires) and
    SessionInfo."""
    peer = Peer(port)
    my = ids(f"ID:{name}")
    peer.send(client_wfi(), Structure(t.CONNECTION_INFO, {
        "commandId": 1, "responseRequired": True, "connectionId": my["connection"],
        "clientId": name,
    }), Structure(t.SESSION_INFO, {
        "commandId": 2, "responseRequired": True, "sessionId": my["session"],
    }))  # fmt: skip
    assert peer.until(t.RESPONSE)["correlationId"] == 1
    assert peer.until(t.RESPONSE)["correlationId"] == 2
    return peer, my


@pytest.mark.parametrize("broker", ["activemq", "dovecote"])
def test_wrong_ack_type_leaves_the_connection_in_step(ports: dict[str, int], broker: str) -> None:
    peer, my = connected(ports[broker], f"wrong-ack-{broker}")
    peer.send(bad_ack(my, 10), Structure(t.PRODUCER_INFO, {
        "commandId": 11, "responseRequired": True, "producerId": my["producer"],
    }))  # fmt: skip
    answers = [peer.next(), peer.next()]
    assert [a["correlationId"] for a in answers] == [10, 11]
    expected = t.EXCEPTION_RESPONSE if broker == "dovecote" else t.RESPONSE
    assert [a.type for a in answers] == [expected, t.RESPONSE]
    peer.close()


@pytest.mark.parametrize("broker", ["activemq", "dovecote"])
def test_unreadable_frame_ends_the_connection(ports: dict[str, int], broker: str) -> None:
    peer, my = connected(ports[broker], f"bad-utf8-{broker}")
    frame = bytearray(MARSHALLER.frame(Structure(t.CONSUMER_INFO, {
        "commandId": 7, "responseRequired": True, "consumerId": my["consumer"],
        "destination": queue("hostile"), "selector": "a = 'XX'",
    })))  # fmt: skip
    at = frame.index(b"XX")
    frame[at : at + 2] = b"\xff\xfe"
    peer.sock.sendall(bytes(frame))
    said = []
    with pytest.raises(EOFError):
        while True:
            said.append(peer.next(timeout=10).type)
    # ActiveMQ may send a BrokerInfo (or a keep-alive) at any moment: not an answer.
    said = [kind for kind in said if kind not in (t.BROKER_INFO, t.KEEP_ALIVE_INFO)]
    assert said == ([t.EXCEPTION_RESPONSE] if broker == "dovecote" else [])
    peer.close()
