"""A standard acknowledgement that does not match what was dispatched to the consumer is
refused and acknowledges nothing (a stale ack from before a failover must not remove the
wrong messages): side by side, on bare OpenWire."""

from __future__ import annotations

from differ import Target
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from rawopenwire import Peer, message, queue

MESSAGES = 4


def _open(peer: Peer, target: Target, tag: str) -> dict[str, Structure]:
    return peer.handshake(f"ID:unmatched-{tag}-{target.name}",
                          client_id=f"unmatched-{tag}-{target.name}", producer=True)  # fmt: skip


def _consume(peer: Peer, my: dict[str, Structure], destination: Structure) -> list[Structure]:
    peer.send(Structure(t.CONSUMER_INFO, {
        "commandId": 100, "responseRequired": True, "consumerId": my["consumer"],
        "destination": destination, "prefetchSize": 10, "dispatchAsync": True,
    }))  # fmt: skip
    return [peer.until(t.MESSAGE_DISPATCH)["message"]["messageId"] for _ in range(MESSAGES)]


def _answer(peer: Peer, command_id: int) -> str:
    answer = peer.next()
    while answer.type not in (t.RESPONSE, t.EXCEPTION_RESPONSE) or (
        answer["correlationId"] != command_id
    ):
        answer = peer.next()
    return "refused" if answer.type == t.EXCEPTION_RESPONSE else "accepted"


def unmatched_acks(target: Target) -> tuple[list[str], int]:
    """Two acks that do not match the dispatched list (a count that differs, a first message
    that was never dispatched), then a matching one for the first message: the answers, and
    how many messages a new consumer gets once the connection is gone."""
    destination = queue(target.name)
    peer = Peer(target.openwire_port)
    try:
        my, dispatched = _backlog_dispatched(peer, target, destination)
        never = Structure(t.MESSAGE_ID, {"producerId": my["producer"], "producerSequenceId": 99})
        answers = []
        for command_id, first, last, count in (
            (200, dispatched[0], dispatched[2], 2),  # three in the range, two counted
            (201, never, dispatched[1], 2),  # the range starts at a message never sent
            (202, dispatched[0], dispatched[0], 1),  # matches: the first message goes
        ):
            peer.send(Structure(t.MESSAGE_ACK, {
                "commandId": command_id, "responseRequired": True, "destination": destination,
                "consumerId": my["consumer"], "ackType": 2, "firstMessageId": first,
                "lastMessageId": last, "messageCount": count,
            }))  # fmt: skip
            answers.append(_answer(peer, command_id))
    finally:
        peer.close()
    return answers, _left(target, destination)


def _backlog_dispatched(
    peer: Peer, target: Target, destination: Structure
) -> tuple[dict[str, Structure], list[Structure]]:
    """MESSAGES persistent messages sent, then dispatched to a consumer: their ids."""
    my = _open(peer, target, "a")
    for seq in range(1, MESSAGES + 1):
        peer.send(message(my, destination, seq, command_id=10 + seq, persistent=True))
        peer.until(t.RESPONSE)
    return my, _consume(peer, my, destination)


def _left(target: Target, destination: Structure) -> int:
    """How many messages a new consumer gets, the first connection gone."""
    peer = Peer(target.openwire_port)
    try:
        my = _open(peer, target, "b")
        return len(_consume_all(peer, my, destination))
    finally:
        peer.close()


def individual_acks_of_unknown_messages(target: Target) -> tuple[list[str], int]:
    """An individual ack of a message never dispatched, answered, then one not answered
    and a good one behind it: what each answer was (a ConnectionError included), and how
    many messages a new consumer gets once the connection is gone."""
    destination = queue(target.name)
    peer = Peer(target.openwire_port)
    try:
        my, dispatched = _backlog_dispatched(peer, target, destination)
        never = Structure(t.MESSAGE_ID, {"producerId": my["producer"], "producerSequenceId": 99})
        for command_id, acked, answered in ((300, never, True), (301, never, False),
                                            (302, dispatched[0], True)):  # fmt: skip
            peer.send(Structure(t.MESSAGE_ACK, {
                "commandId": command_id, "responseRequired": answered, "destination": destination,
                "consumerId": my["consumer"], "ackType": 4, "lastMessageId": acked,
                "messageCount": 1,
            }))  # fmt: skip
        said: list[str] = []
        while not said or said[-1] != "302":
            s = peer.next()
            if s.type == t.CONNECTION_ERROR:
                said.append("connection error")
            elif s.type in (t.RESPONSE, t.EXCEPTION_RESPONSE) and s["correlationId"] >= 300:
                # (ActiveMQ's answer to the ConsumerInfo may come after its dispatches.)
                refused = " refused" if s.type == t.EXCEPTION_RESPONSE else ""
                said.append(f"{s['correlationId']}{refused}")
    finally:
        peer.close()
    return said, _left(target, destination)


def _consume_all(peer: Peer, my: dict[str, Structure], destination: Structure) -> list[object]:
    peer.send(Structure(t.CONSUMER_INFO, {
        "commandId": 100, "responseRequired": True, "consumerId": my["consumer"],
        "destination": destination, "prefetchSize": 10, "dispatchAsync": True,
    }))  # fmt: skip
    got = []
    while True:
        try:
            s = peer.next(1.5)
        except TimeoutError:
            return got
        if s.type == t.MESSAGE_DISPATCH and s["message"] is not None:
            got.append(s["message"]["messageId"])


def test_an_ack_that_does_not_match_the_dispatched_list_acks_nothing(differ) -> None:
    differ(unmatched_acks, (["refused", "refused", "accepted"], MESSAGES - 1))


def test_an_individual_ack_of_a_message_not_in_flight_is_ignored(differ) -> None:
    """As ActiveMQ (PrefetchSubscription: "Acknowledgment out of sync", at debug): no
    ExceptionResponse, no ConnectionError; it acknowledges nothing, the good one its own."""
    differ(individual_acks_of_unknown_messages, (["300", "302"], MESSAGES - 1))
