"""Bad STOMP frames side by side: each gets an ERROR (with the receipt-id of a frame that
asked for a receipt), and the connection goes on or ends as ActiveMQ's does: a frame it
cannot read or a command it does not know ends it; a refusal of a well-formed one does not."""

from __future__ import annotations

import pytest

from differ import Peers, Target
from rawstomp import RawStomp

# Each frame asks for receipt "e"; {q} is the scenario's queue.
BAD_FRAMES = {
    "unknown_command": "BOGUS\nreceipt:e\n\n",
    "ack_of_an_unknown_id": "ACK\nid:ID:nope\nreceipt:e\n\n",
    "commit_of_an_unknown_transaction": "COMMIT\ntransaction:never\nreceipt:e\n\n",
    "send_in_an_unknown_transaction": (
        "SEND\ndestination:/queue/{q}\ntransaction:ghost\nreceipt:e\n\n"
    ),
    "unsubscribe_of_an_unknown_id": "UNSUBSCRIBE\nid:missing\nreceipt:e\n\n",
    "invalid_selector": (
        "SUBSCRIBE\ndestination:/queue/{q}.s\nid:9\nselector:a = = 1\nreceipt:e\n\n"
    ),
    "send_without_destination": "SEND\nreceipt:e\n\n",
}

# Frames ActiveMQ takes as they come and dovecote refuses with an ERROR naming the problem, a
# difference on purpose (docs/differences.md): ActiveMQ answers the first four with a RECEIPT,
# reading a bad escape as it stands, skipping a header line without a colon and taking an
# unknown priority or ack mode as the default; a negative content-length it answers by
# closing the connection without a word. dovecote closes where the frame could not be read
# and goes on where only a header's value is wrong.
STRICTER = {
    "header_line_without_colon": (
        "SEND\ndestination:/queue/{q}\nbad header line\nreceipt:e\n\n",
        {"answer": "ERROR", "receipt": None, "then": "closed"},
    ),
    "bad_escape": (
        "SEND\ndestination:/queue/{q}\nbad:esc\\qape\nreceipt:e\n\n",
        {"answer": "ERROR", "receipt": None, "then": "closed"},
    ),
    "negative_content_length": (
        "SEND\ndestination:/queue/{q}\ncontent-length:-4\nreceipt:e\n\n",
        {"answer": "ERROR", "receipt": None, "then": "closed"},
    ),
    "priority_not_a_number": (
        "SEND\ndestination:/queue/{q}\npriority:high\nreceipt:e\n\n",
        {"answer": "ERROR", "receipt": "e", "then": ("RECEIPT", "after")},
    ),
    "unknown_ack_mode": (
        "SUBSCRIBE\ndestination:/queue/{q}.s\nid:1\nack:sometimes\nreceipt:e\n\n",
        {"answer": "ERROR", "receipt": "e", "then": ("RECEIPT", "after")},
    ),
}


def after_a_bad_frame(frame: str):  # type: ignore[no-untyped-def]
    def scenario(target: Target) -> dict[str, object]:
        client = RawStomp(target.stomp_address)
        try:
            client.connect()
            client.send((frame.format(q=target.name) + "\x00").encode())
            command, headers, _ = client.read_frame()
            outcome: dict[str, object] = {"answer": command, "receipt": headers.get("receipt-id")}
            # Still open? A SEND with a receipt says.
            client.sock.settimeout(3)
            try:
                client.send(
                    f"SEND\ndestination:/queue/{target.name}\nreceipt:after\n\nx\x00".encode()
                )
                command, headers, _ = client.read_frame()
                outcome["then"] = (command, headers.get("receipt-id"))
            except (ConnectionError, TimeoutError):
                outcome["then"] = "closed"
            return outcome
        finally:
            client.close()

    return scenario


@pytest.mark.parametrize("kind", sorted(BAD_FRAMES))
def test_a_bad_frame_gets_an_error_and_the_connection_fares_as_on_activemq(
    differ, kind: str
) -> None:
    outcome = differ(after_a_bad_frame(BAD_FRAMES[kind]))
    assert outcome["answer"] == "ERROR"


@pytest.mark.parametrize("kind", sorted(STRICTER))
def test_a_frame_activemq_takes_as_it_comes_gets_an_error_naming_the_problem(
    peers: Peers, kind: str
) -> None:
    frame, expected = STRICTER[kind]
    target = Target("dovecote", *peers.dovecote, f"diff.stricter.{kind}")
    assert after_a_bad_frame(frame)(target) == expected
