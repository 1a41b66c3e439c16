"""A persistent send whose message id (producer id, producer sequence id) the broker already
had is answered as stored and not delivered again, side by side, on bare OpenWire: sent
again on the same connection, and sent again after the connection was lost, on a new one
with the same ids and ``failoverReconnect`` (what a failover transport replays when the
answer was lost), and after a restart of the broker. ActiveMQ drops it in
ProducerBrokerExchange.canDispatch and KahaDB; dovecote in its producer duplicate check
(broker/producer_audit.py). Before, dovecote delivered such a send twice."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from differ import Target
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from rawopenwire import Peer, client_wfi, ids, message, queue

QUIET_S = 1.0


def opened(target: Target, conn: str, reconnect: bool) -> tuple[Peer, dict[str, Structure]]:
    """A connection with the ids of ``conn``, its session and producer, all answered; a
    failover reconnect is tried until the broker has let the lost connection go."""
    deadline = time.monotonic() + 10
    while True:
        peer = Peer(target.openwire_port)
        my = ids(conn)
        peer.send(client_wfi(), Structure(t.CONNECTION_INFO, {
            "commandId": 1, "responseRequired": True, "connectionId": my["connection"],
            "clientId": conn, "failoverReconnect": reconnect,
        }))  # fmt: skip
        answer = peer.next()
        while answer.type not in (t.RESPONSE, t.EXCEPTION_RESPONSE):
            answer = peer.next()
        if answer.type == t.RESPONSE:
            break
        peer.close()
        assert time.monotonic() < deadline, f"refused: {answer['exception']}"
        time.sleep(0.1)
    peer.send(Structure(t.SESSION_INFO, {"commandId": 2, "responseRequired": True,
                                         "sessionId": my["session"]}))  # fmt: skip
    peer.until(t.RESPONSE)
    peer.send(Structure(t.PRODUCER_INFO, {"commandId": 3, "responseRequired": True,
                                          "producerId": my["producer"]}))  # fmt: skip
    peer.until(t.RESPONSE)
    return peer, my


def sent(
    peer: Peer,
    my: dict[str, Structure],
    target: Target,
    seq: int,
    command: int,
    origin: Structure | None = None,
) -> str:
    """The answer to one persistent send: "ok" or the exception's class. ``origin``: the
    message id names that producer instead of the sender (a message passed on)."""
    structure = message(my, queue(target.name), seq, command_id=command, persistent=True)
    if origin is not None:
        structure.fields["messageId"].fields["producerId"] = origin
    peer.send(structure)
    while True:
        answer = peer.next()
        if answer.type == t.RESPONSE:
            return "ok"
        if answer.type == t.EXCEPTION_RESPONSE:
            return str(answer["exception"]["className"])


def delivered(target: Target) -> list[int]:
    """The producer sequence ids a fresh consumer of the queue is given."""
    peer, my = opened(target, f"ID:dup-reader-{uuid.uuid4().hex[:8]}", False)
    try:
        peer.send(Structure(t.CONSUMER_INFO, {
            "commandId": 10, "responseRequired": True, "consumerId": my["consumer"],
            "destination": queue(target.name), "prefetchSize": 100,
        }))  # fmt: skip
        got: list[int] = []
        while True:
            try:
                s = peer.next(QUIET_S)
            except TimeoutError:
                return got
            if s.type == t.MESSAGE_DISPATCH and s["message"] is not None:
                got.append(int(s["message"]["messageId"]["producerSequenceId"]))
    finally:
        peer.close()


def send_again(target: Target, how: str) -> tuple[list[str], list[int]]:
    conn = f"ID:dup-{uuid.uuid4().hex[:8]}"
    peer, my = opened(target, conn, False)
    origin = None
    if how == "another producer's ids":
        origin = ids(f"ID:origin-{uuid.uuid4().hex[:8]}")["producer"]
    try:
        answers = [sent(peer, my, target, 1, 11, origin), sent(peer, my, target, 2, 12, origin)]
        if how == "failover reconnect":
            peer.close()  # the connection is lost; the same ids come back
            peer, my = opened(target, conn, True)
        answers += [sent(peer, my, target, 2, 13, origin), sent(peer, my, target, 3, 14, origin)]
    finally:
        peer.close()
    return answers, delivered(target)


@pytest.mark.parametrize("how", ["same connection", "failover reconnect", "another producer's ids"])
def test_a_persistent_send_had_already_is_answered_and_delivered_once(differ, how: str) -> None:
    differ(lambda target: send_again(target, how), (["ok"] * 4, [1, 2, 3]))


def before_restart(target: Target, conn: str) -> list[str]:
    peer, my = opened(target, conn, False)
    try:
        return [sent(peer, my, target, 1, 11), sent(peer, my, target, 2, 12)]
    finally:
        peer.close()


def after_restart(target: Target, conn: str, reconnect: bool) -> tuple[list[str], list[int]]:
    peer, my = opened(target, conn, reconnect)
    try:
        answers = [sent(peer, my, target, 2, 13), sent(peer, my, target, 3, 14)]
    finally:
        peer.close()
    return answers, delivered(target)


def across_a_restart(
    start: Callable[[], AbstractContextManager[object]], port: int, broker: str
) -> dict[str, tuple[list[str], list[int]]]:
    """Each way of sending 2 again after the broker restarted (its queue still holding 1
    and 2): with failoverReconnect (a failover transport), and without (a new connection)."""
    ways = {"failover reconnect": True, "new connection": False}
    conns = {way: f"ID:dup-restart-{uuid.uuid4().hex[:8]}" for way in ways}
    targets = {way: Target(broker, port, 0, f"diff.dup.restart.{conns[way][-8:]}") for way in ways}
    with start():
        for way in ways:
            assert before_restart(targets[way], conns[way]) == ["ok", "ok"]
    with start():
        return {way: after_restart(targets[way], conns[way], ways[way]) for way in ways}


def test_a_send_stored_before_a_restart_and_sent_again_is_delivered_once(tmp_path: Path) -> None:
    from activemq import running_activemq
    from brokers import running_broker
    from ports import free_port

    amq_port, ours_port = free_port(), free_port()
    (tmp_path / "activemq").mkdir()
    (tmp_path / "dovecote").mkdir()
    activemq = across_a_restart(
        lambda: running_activemq(base=tmp_path / "activemq", openwire_port=amq_port),
        amq_port, "activemq",
    )  # fmt: skip
    dovecote = across_a_restart(
        lambda: running_broker("", tmp_path / "dovecote", openwire_port=ours_port),
        ours_port, "dovecote",
    )  # fmt: skip
    assert dovecote == activemq, f"dovecote showed {dovecote!r}, ActiveMQ {activemq!r}"
    expected = (["ok", "ok"], [1, 2, 3])
    assert activemq == {"failover reconnect": expected, "new connection": expected}
