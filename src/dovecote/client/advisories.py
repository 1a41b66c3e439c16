"""watchTopicAdvisories (on by default, as in the Java client): the connection follows the
broker's temporary-destination advisories, so that it knows which temporary destinations
exist anywhere on the broker and refuses, before going to the wire, to consume from or send
to one that has been deleted (the Java client's InvalidDestinationException)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dovecote.client.consumer import MessageConsumer
from dovecote.client.delivered import STANDARD_ACK
from dovecote.client.transport import JMSError
from dovecote.core.destinations import Destination, DestinationType
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.structures import destination_of

if TYPE_CHECKING:
    from dovecote.client.connection import Connection

TEMP_ADVISORIES = Destination(
    DestinationType.TOPIC, "ActiveMQ.Advisory.TempQueue,ActiveMQ.Advisory.TempTopic"
)
ADD, REMOVE = 0, 1


class TempDestinationWatcher(MessageConsumer):
    """A consumer of the advisories in a session of its own; its messages never reach the
    application. Each is acknowledged as it is read."""

    _takes_connection_settings = False

    def __init__(self, connection: Connection) -> None:
        self.active: set[Destination] = set()
        session = connection.create_session()
        super().__init__(session, next(session._consumer_ids), TEMP_ADVISORIES, None, None)

    def _dispatched(self, dispatch: Structure, interruptions: int = -1) -> None:
        message = dispatch["message"]
        if message is None:
            return
        info = message["dataStructure"]
        if isinstance(info, Structure) and info.type == t.DESTINATION_INFO:
            destination = destination_of(info["destination"])
            if destination is not None:
                if info["operationType"] == ADD:
                    self.active.add(destination)
                elif info["operationType"] == REMOVE:
                    self.active.discard(destination)
        # One-way whatever jms.sendAcksAsync says (AdvisoryConsumer's own acks are): this
        # runs on the reader thread, which could never read the answer it would wait for.
        self.session.connection.oneway(self._ack(dispatch, STANDARD_ACK, 1, dispatch))

    def check(self, destination: Destination, verb: str) -> None:
        if destination.is_temporary and destination not in self.active:
            raise JMSError(
                "javax.jms.InvalidDestinationException",
                f"cannot {verb} a temporary destination that has been deleted: {destination}",
            )
