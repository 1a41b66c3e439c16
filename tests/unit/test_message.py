"""The core message's hand-written copies stay equal to dataclasses.replace."""

from __future__ import annotations

from dataclasses import fields, replace

from dovecote.core.commands import DestinationInfo
from dovecote.core.destinations import queue, topic
from dovecote.core.ids import ConnectionId
from dovecote.core.message import BodyType, Message


def test_routed_equals_replace_for_every_field() -> None:
    full = Message(
        message_id="ID:a:1:1:1", destination=topic("a,b"), body=b"body",
        body_type=BodyType.TEXT, persistent=True, priority=7, timestamp=1, expiration=2,
        correlation_id="c", reply_to=queue("r"), type="t", group_id="g", group_seq=3,
        producer_id="p", connection_id="cx", user_id="u", redelivery_counter=4,
        original_destination=queue("o"), properties={"k": "v"},
        data_structure=DestinationInfo(ConnectionId("c"), queue("x"), True), sequence=9,
    )  # fmt: skip
    # Every field has a value other than its default, so a field routed() forgot would show.
    assert all(getattr(full, f.name) != f.default for f in fields(Message))
    assert full.routed(queue("b"), 42) == replace(full, destination=queue("b"), sequence=42)
