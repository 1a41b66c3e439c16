"""The receiving side of a bridge: a dovecote broker drops a message a network bridge sends
again (same message id, from the same remote broker), on a new connection as a bridge
reconnecting after a crash would, and after its own restart while the message is still
queued; a client's sends are not audited. The bridge is played here over OpenWire, as
ActiveMQ's and dovecote's send: BrokerInfo with networkConnection, then the messages with a
brokerPath."""

from __future__ import annotations

import asyncio
from pathlib import Path

from brokers import running_broker
from dovecote.core.destinations import queue
from dovecote.network.wire import RemoteConnection
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.primitives import encode_text_body
from dovecote.protocol.openwire.structures import message_id_structure
from networks import browse_count, consumer, quiet, receive
from ports import free_port

REMOTE = "ID:remote-broker"


async def bridge_send(port: int, name: str, message_ids: list[str], network: bool = True) -> None:
    """One connection, as a bridge's: each message sent persistent, answered."""
    remote = await RemoteConnection.open("127.0.0.1", port, lambda s: None)
    try:
        if network:
            remote.send(Structure(t.BROKER_INFO, {
                "brokerId": Structure(t.BROKER_ID, {"value": REMOTE}),
                "brokerName": "remote", "networkConnection": True,
            }))  # fmt: skip
        conn = f"ID:bridge-{id(remote)}"
        await remote.request(Structure(t.CONNECTION_INFO, {
            "connectionId": Structure(t.CONNECTION_ID, {"value": conn}),
            "clientId": f"c-{id(remote)}"}))  # fmt: skip
        producer = Structure(t.PRODUCER_ID, {"connectionId": conn, "sessionId": 1, "value": 1})
        remote.send(
            Structure(
                t.SESSION_INFO,
                {"sessionId": Structure(t.SESSION_ID, {"connectionId": conn, "value": 1})},
            )
        )
        remote.send(Structure(t.PRODUCER_INFO, {"producerId": producer}))
        for message_id in message_ids:
            await remote.request(Structure(t.TEXT_MESSAGE, {
                "producerId": producer,
                "destination": Structure(t.QUEUE, {"physicalName": name}),
                "messageId": message_id_structure(message_id), "persistent": True,
                "priority": 4, "content": encode_text_body(message_id),
                "brokerPath": [Structure(t.BROKER_ID, {"value": REMOTE})] if network else None,
            }))  # fmt: skip
    finally:
        await remote.close()


def ids(*numbers: int) -> list[str]:
    return [f"ID:origin-1-1:1:1:{n}" for n in numbers]


def test_a_bridge_sending_again_delivers_nothing_twice(tmp_path: Path) -> None:
    port = free_port()
    with running_broker("", tmp_path, openwire_port=port):
        asyncio.run(bridge_send(port, "audit.q", ids(1, 2, 3)))
        asyncio.run(bridge_send(port, "audit.q", ids(2, 3, 4)))  # reconnected: 2, 3 again
        assert browse_count(port, queue("audit.q")) == 4
        # A client sending the same id twice is not a bridge: the producer duplicate check
        # keeps one, as ActiveMQ does (tests/differential/test_duplicate_sends.py).
        asyncio.run(bridge_send(port, "client.q", ids(7, 7), network=False))
        assert browse_count(port, queue("client.q")) == 1
    # Restarted (the answer to 4 lost in a crash): 4 is sent again and still dropped.
    with running_broker("", tmp_path, openwire_port=port):
        asyncio.run(bridge_send(port, "audit.q", ids(4, 5)))
        assert browse_count(port, queue("audit.q")) == 5  # (clients drop duplicates too)
        with consumer(port, queue("audit.q")) as on_queue:
            assert receive(on_queue, 5) == ids(1, 2, 3, 4, 5)
            assert quiet(on_queue)


def test_a_message_consumed_before_a_crash_is_still_dropped_when_sent_again(
    tmp_path: Path,
) -> None:
    """The audit outlives a kill -9 of the receiving broker: 1-3 were stored, answered and
    consumed, the broker crashed, and a bridge that never saw the answers sends them again
    with 4: only 4 is delivered (the queue no longer holds 1-3 to read them back from)."""
    port = free_port()
    with running_broker("", tmp_path, openwire_port=port) as b:
        asyncio.run(bridge_send(port, "consumed.q", ids(1, 2, 3)))
        with consumer(port, queue("consumed.q")) as on_queue:
            assert receive(on_queue, 3) == ids(1, 2, 3)
        assert browse_count(port, queue("consumed.q")) == 0
        b.process.kill()
        b.process.wait()
    with running_broker("", tmp_path, openwire_port=port):
        asyncio.run(bridge_send(port, "consumed.q", ids(1, 2, 3, 4)))
        with consumer(port, queue("consumed.q")) as on_queue:
            assert receive(on_queue, 4, timeout=2.0) == ids(4)


def test_the_audit_file_keeps_only_its_window(tmp_path: Path) -> None:
    """Unit: the file is rewritten with the window once it has grown to twice its size,
    and a forgotten id stays forgotten when read back."""
    from dovecote.network.audit import SendAudit

    journal = tmp_path / "remote.audit"
    audit = SendAudit(REMOTE, None, size=4, journal=journal)  # type: ignore[arg-type]
    for n in range(10):
        audit._remember(f"m{n}")
    audit.forget("m9")
    audit.close()
    assert len(journal.read_text().splitlines()) <= 9
    again = SendAudit(REMOTE, None, size=4, journal=journal)  # type: ignore[arg-type]
    assert "m9" not in again._seen and list(again._seen)[-3:] == ["m6", "m7", "m8"]
    assert len(again._seen) <= 4
    again.close()
