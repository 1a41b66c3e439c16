"""The headers of a MESSAGE frame, side by side on bare STOMP 1.2: which ones a grouped
message with a property carries on an auto-ack and on a client-ack subscription (an ``ack``
header only where the client must ack; the group is no header; a content-length only for a
bytes message, as on ActiveMQ)."""

from __future__ import annotations

from differ import Target
from rawstomp import RawStomp


def headers_seen(target: Target) -> dict[str, list[str]]:
    client = RawStomp(target.stomp_address)
    try:
        client.connect()
        seen: dict[str, list[str]] = {}
        for n, (mode, kind) in enumerate(
            (("auto", "text"), ("client-individual", "text"), ("auto", "bytes"))
        ):
            queue = f"/queue/{target.name}.{n}"
            length = "content-length:1\n" if kind == "bytes" else ""
            client.send(
                f"SEND\ndestination:{queue}\nJMSXGroupID:g\ncolour:blue\nreceipt:s{n}\n"
                f"{length}\nm\x00".encode()
            )  # fmt: skip
            assert client.read_frame()[0] == "RECEIPT"
            client.send(f"SUBSCRIBE\ndestination:{queue}\nid:{n}\nack:{mode}\n\n\x00".encode())
            command, headers, _ = client.read_frame()
            assert command == "MESSAGE", command
            seen[f"{mode}, {kind}"] = sorted(headers)
        return seen
    finally:
        client.close()


def test_message_frames_carry_activemqs_headers(differ) -> None:
    common = ["colour", "destination", "expires", "message-id", "priority", "subscription",
              "timestamp"]  # fmt: skip
    differ(headers_seen, {
        "auto, text": common,
        "client-individual, text": sorted([*common, "ack"]),
        "auto, bytes": sorted([*common, "content-length"]),
    })  # fmt: skip
