"""The receiving side of a bridge: a remote broker's forwarded sends are checked against
the message ids already had from it, so that a bridge sending again what it could not see
acknowledged (its broker or ours crashed in between) delivers nothing twice (ActiveMQ's
producer audit on network connections).

One audit per remote broker, across its connections (a bridge reconnects on a new one):
the ids of the last ``AUDIT_SIZE`` messages it forwarded. After a restart of this broker
the audit of a destination starts from what the destination holds (the first forwarded
send to it reads them once), so a send the remote repeats because our answer was lost in
the crash is still found. A message this broker forwards out again is forgotten, so that
it may come back later (its consumers moved again).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from dovecote.broker.query import BrokerQuery
from dovecote.core.destinations import Destination
from dovecote.core.message import Message
from dovecote.network.paths import broker_path

AUDIT_SIZE: Final = 65_536


class SendAudit:
    """The message ids one remote broker forwarded here lately."""

    def __init__(self, remote_id: str, query: BrokerQuery, size: int = AUDIT_SIZE) -> None:
        self.remote_id = remote_id
        self.query = query
        self.size = size
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._read: set[Destination] = set()
        self.duplicates = 0

    def duplicate(self, message: Message) -> bool:
        """True for a message already had (drop it, answer as if stored); else remember it."""
        destination = message.destination
        if destination.is_queue and destination not in self._read:
            self._read.add(destination)
            self._read_back(destination)
        message_id = message.message_id
        if message_id in self._seen:
            self._seen.move_to_end(message_id)
            self.duplicates += 1
            return True
        self._remember(message_id)
        return False

    def forget(self, message_id: str) -> None:
        self._seen.pop(message_id, None)

    def _remember(self, message_id: str) -> None:
        self._seen[message_id] = None
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)

    def _read_back(self, destination: Destination) -> None:
        """What the queue holds that came from this remote (after a restart of ours)."""
        for message in self.query.browse(destination, self.size):
            if self.remote_id in broker_path(message):
                self._remember(message.message_id)
