"""The broker's read-only query API: what exists and what it holds, for everything outside
broker/ (the admin API, /metrics, the console) and for plugins. Nothing here changes state;
callers never reach into the regions themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dovecote.core.destinations import Destination

if TYPE_CHECKING:
    from dovecote.broker.broker import Broker


class BrokerQuery:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def destination_exists(self, destination: Destination) -> bool:
        """True for a queue or topic the broker knows (one created before, or a temporary
        destination that is open); composite destinations exist when all parts do."""
        regions = self._broker.regions
        for part in destination.components():
            if part.is_temporary:
                if not self._broker.temp_destination_open(part):
                    return False
            elif part.is_queue:
                if part not in regions.queues:
                    return False
            elif part not in regions.topic_subs and part not in regions.topic_stats:
                return False
        return True
