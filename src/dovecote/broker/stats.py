"""ActiveMQ's statistics plugin (compatibility O2), as a broker plugin: a JMS client (and
``dovecote dstat``) asks over the wire by sending to ``ActiveMQ.Statistics.Destination.<query>``
or ``ActiveMQ.Statistics.Broker`` with a reply-to destination, exactly as it would ask an
ActiveMQ that has ``<statisticsBrokerPlugin/>``, and gets map messages back. On unless
``[broker] statistics = false``. It reads the broker through its query API only.
"""

from __future__ import annotations

from typing import ClassVar

from dovecote.broker.connection import ConnectionState
from dovecote.broker.query import DestinationView
from dovecote.broker.replies import AnsweringPlugin
from dovecote.core.destinations import queue, topic
from dovecote.core.message import Message
from dovecote.protocol.openwire.primitives import JavaInt

STATISTICS_PREFIX = "ActiveMQ.Statistics."
DESTINATION_STATISTICS = "ActiveMQ.Statistics.Destination"
BROKER_STATISTICS = "ActiveMQ.Statistics.Broker"
END_OF_LIST = "ActiveMQ.Statistics.Destination.List.End.With.Null"
"""In the query or as a property: finish the replies with an empty map message."""


def destination_map(view: DestinationView, broker_name: str) -> dict[str, object]:
    """The fields ActiveMQ's statistics plugin puts in its map message."""
    percent = 100 * view.memory_usage // view.memory_limit if view.memory_limit > 0 else 0
    return {
        "brokerName": broker_name,
        "destinationName": str(view.destination),
        "size": view.size,
        "enqueueCount": view.enqueued,
        "dequeueCount": view.dequeued,
        "dispatchCount": view.dispatched,
        "expiredCount": view.expired,
        "inflightCount": view.inflight,
        "consumerCount": view.consumers,
        "producerCount": view.producers,
        "memoryUsage": view.memory_usage,
        "memoryLimit": view.memory_limit,
        "memoryPercentUsage": JavaInt(percent),
    }


class StatisticsPlugin(AnsweringPlugin):
    name: ClassVar[str] = "statistics"
    request_prefixes: ClassVar[tuple[str, ...]] = (STATISTICS_PREFIX,)

    async def on_request(self, state: ConnectionState, message: Message) -> None:
        await self.broker.deliver(self.answer(message))

    def answer(self, request: Message) -> list[Message]:
        """The answer to a request sent to an ``ActiveMQ.Statistics.*`` destination: map
        messages to the request's reply-to, correlated with the request."""
        query = self.broker.query
        name = request.destination.name
        broker_name = self.broker.settings.broker_name
        maps: list[dict[str, object]] = []
        if name.startswith(DESTINATION_STATISTICS):
            wanted = name[len(DESTINATION_STATISTICS) :].removeprefix(".")
            end_of_list = END_OF_LIST in wanted or END_OF_LIST in request.properties
            wanted = wanted.replace(END_OF_LIST, "")
            if wanted:
                make = queue if request.destination.is_queue else topic
                maps = [destination_map(v, broker_name) for v in query.destinations(make(wanted))]
            if end_of_list:
                maps.append({})
        elif name.startswith(BROKER_STATISTICS):
            maps = [query.broker().as_map()]
        return [self.replies.map_reply(request, body, type="Advisory") for body in maps]
