"""Temporary destinations (SPEC D1, D3): which connection owns each, and the advisories
(ActiveMQ.Advisory.TempQueue and TempTopic) that tell the clients watching them (the JMS
client by default) which exist."""

from __future__ import annotations

from itertools import count

from dovecote.broker.regions import now_ms
from dovecote.core.commands import DestinationInfo
from dovecote.core.destinations import Destination, destination_matches, topic
from dovecote.core.errors import BrokerError
from dovecote.core.ids import ConnectionId
from dovecote.core.message import BodyType, Message

TEMP_QUEUE_ADVISORY = topic("ActiveMQ.Advisory.TempQueue")
TEMP_TOPIC_ADVISORY = topic("ActiveMQ.Advisory.TempTopic")


def advisory_topic(destination: Destination) -> Destination:
    return TEMP_QUEUE_ADVISORY if destination.is_queue else TEMP_TOPIC_ADVISORY


class TempDestinations:
    def __init__(self, broker_name: str, producer: str) -> None:
        self.owners: dict[Destination, ConnectionId] = {}
        """Each open temporary destination and the connection that made it."""
        self._broker_name = broker_name
        self._producer = producer
        self._seq = count(1)

    def claim(self, destination: Destination, connection_id: ConnectionId) -> None:
        """Record the connection that made a temporary destination (again is fine)."""
        owner = self.owners.setdefault(destination, connection_id)
        if owner != connection_id:
            raise BrokerError(f"temporary destination {destination} belongs to another connection")

    def advisory(self, owner: ConnectionId, destination: Destination, add: bool) -> Message:
        """The advisory of a temporary destination made (``add``) or removed."""
        return Message(
            message_id=f"{self._producer}:{next(self._seq)}",
            destination=advisory_topic(destination),
            body_type=BodyType.MESSAGE,
            type="Advisory",
            timestamp=now_ms(),
            properties={"originBrokerName": self._broker_name},
            data_structure=DestinationInfo(owner, destination, add),
        )

    def replay(self, subscribed: Destination) -> list[Message]:
        """What a new subscriber to ``subscribed`` (an advisory topic, or a wildcard over
        them) learns first: the temporary destinations that exist."""
        if not subscribed.is_topic or "ActiveMQ.Advisory.Temp" not in subscribed.name:
            return []
        return [
            self.advisory(owner, destination, add=True)
            for destination, owner in self.owners.items()
            if destination_matches(subscribed, advisory_topic(destination))
        ]
