"""Temporary destinations (compatibility D1): which connection owns each. Their advisories
(ActiveMQ.Advisory.TempQueue and TempTopic) are the advisory plugin's (advisories.py)."""

from __future__ import annotations

from dovecote.core.destinations import Destination
from dovecote.core.errors import BrokerError
from dovecote.core.ids import ConnectionId


class TempDestinations:
    def __init__(self) -> None:
        self.owners: dict[Destination, ConnectionId] = {}
        """Each open temporary destination and the connection that made it."""

    def claim(self, destination: Destination, connection_id: ConnectionId) -> None:
        """Record the connection that made a temporary destination (again is fine)."""
        owner = self.owners.setdefault(destination, connection_id)
        if owner != connection_id:
            raise BrokerError(f"temporary destination {destination} belongs to another connection")
