"""Replies from the broker itself to a request's reply-to, correlated with it: the
statistics plugin's and the stream requests' answers, and the base of such plugins."""

from __future__ import annotations

import time
from itertools import count

from dovecote.broker.plugins import BrokerPlugin, PluginHost
from dovecote.core.message import BodyType, Message, PropertyValue
from dovecote.protocol.openwire.primitives import encode_map


class Replies:
    """Makes the replies of one plugin, under a producer id of its own."""

    def __init__(self, producer: str) -> None:
        self._producer = producer
        self._seq = count(1)

    def reply(
        self,
        request: Message,
        body: bytes = b"",
        body_type: BodyType = BodyType.MESSAGE,
        properties: dict[str, PropertyValue] | None = None,
        type: str | None = None,
    ) -> Message:
        assert request.reply_to is not None
        return Message(
            message_id=f"{self._producer}:{next(self._seq)}",
            destination=request.reply_to,
            body=body,
            body_type=body_type,
            timestamp=int(time.time() * 1000),
            type=type,
            correlation_id=request.correlation_id,
            properties=properties or {},
        )

    def map_reply(
        self,
        request: Message,
        body: dict[str, object],
        type: str | None = None,
        properties: dict[str, PropertyValue] | None = None,
    ) -> Message:
        return self.reply(request, encode_map(body), BodyType.MAP, properties, type)


class AnsweringPlugin(BrokerPlugin):
    """A plugin that answers requests to the broker (its ``request_prefixes``), replying
    under a producer id of its own."""

    def __init__(self) -> None:
        self._broker: PluginHost | None = None
        self.replies = Replies("")

    async def start(self, broker: PluginHost) -> None:
        self._broker = broker
        self.replies = Replies(f"{broker.ids.next_name()}:0:0")

    @property
    def broker(self) -> PluginHost:
        assert self._broker is not None, f"the {self.name} plugin is not started"
        return self._broker
