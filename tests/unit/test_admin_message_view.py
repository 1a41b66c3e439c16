"""The admin API's view of a message shows what a client would see of it."""

from __future__ import annotations

from dovecote.core.destinations import queue
from dovecote.core.message import BROKER_PATH_PROPERTY, Message
from dovecote.web.admin_actions import message_json


def test_the_network_broker_path_is_not_shown_as_a_property() -> None:
    forwarded = Message(
        "ID:p:1:1:1", queue("orders"), b"x",
        properties={"region": "eu", BROKER_PATH_PROPERTY: "ID:east-1,ID:west-1"},
    )  # fmt: skip
    assert message_json(forwarded)["properties"] == {"region": "eu"}
    assert message_json(forwarded, full=True)["properties"] == {"region": "eu"}
