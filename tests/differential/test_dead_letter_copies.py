"""What a message looks like in the dead-letter queue, side by side over STOMP: its expiry
cleared and the old one kept in ``originalExpiration``, its original destination named, the
cause given where there is one (an expiry), none for a NACK (ActiveMQ's STOMP gives none)."""

from __future__ import annotations

import time

from differ import Target
from stompclient import Client

SHOWN = ("expires", "persistent", "original-destination", "dlqDeliveryFailureCause")


def _dead_copy(target: Target, how: str) -> dict[str, str]:
    name = f"{target.name}.{how}"
    with Client(target.stomp_address) as dlq, Client(target.stomp_address) as client:
        dlq.subscribe("/queue/ActiveMQ.DLQ", selector=f"test = '{name}'")
        ttl_ms = 300 if how == "expired" else 3_600_000
        expires = int(time.time() * 1000) + ttl_ms
        client.send(f"/queue/{name}", "m", persistent="true", expires=str(expires), test=name)
        if how == "nacked":
            client.subscribe(f"/queue/{name}", ack="client-individual")
            client.nack(client.receive())
        else:
            # The time to live must pass: then a consumer's arrival finds it expired.
            time.sleep(ttl_ms / 1000 + 0.3)
            client.subscribe(f"/queue/{name}")
        headers = dlq.receive().headers
    shown = {key: headers[key] for key in SHOWN if key in headers}
    if "dlqDeliveryFailureCause" in shown:
        shown["dlqDeliveryFailureCause"] = shown["dlqDeliveryFailureCause"].replace(
            str(expires), "<expires>"
        )
    shown["originalExpiration"] = (
        "the message's" if headers.get("originalExpiration") == str(expires) else "other"
    )
    shown["original-destination"] = shown["original-destination"].replace(name, "<queue>")
    return shown


def nacked(target: Target) -> dict[str, str]:
    return _dead_copy(target, "nacked")


def expired(target: Target) -> dict[str, str]:
    return _dead_copy(target, "expired")


def test_a_nacked_message_in_the_dlq(differ) -> None:
    differ(nacked, {
        "expires": "0", "persistent": "true", "original-destination": "/queue/<queue>",
        "originalExpiration": "the message's",
    })  # fmt: skip


def test_an_expired_message_in_the_dlq(differ) -> None:
    differ(expired, {
        "expires": "0", "persistent": "true", "original-destination": "/queue/<queue>",
        "originalExpiration": "the message's",
        "dlqDeliveryFailureCause": "java.lang.Throwable: Message Expired. Expiration:<expires>",
    })  # fmt: skip
