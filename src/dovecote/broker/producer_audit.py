"""The producer duplicate check: a persistent send whose message id (producer id, producer
sequence id) is not above the last one had from that producer is dropped and answered as
stored, so a send a failover client replays after losing its answer is not stored twice.

ActiveMQ does this in two places: the connection's ProducerBrokerExchange.canDispatch
drops a persistent send at or below the producer's last sequence (the store's
getLastProducerSequenceId for a failover reconnect), and answers it as any send; KahaDB
refuses to add a message id a destination holds ("Duplicate message add attempt
rejected"), for any connection. Here one check does both, for every connection but a
network bridge's (the network plugin's audit handles those), whatever the store kind: it
starts from what the store holds (store/producers.py: a promoted replicated slave holds
the master's keys) and notes every persistent send after. A duplicate in a transaction is
dropped too (ActiveMQ logs it as a warning): it is not part of the transaction.

It hangs on the connection's ``send_audit`` (the seam the network audit uses), which the
broker tests on every send anyway: a connection costs one call per send, no await.
Pipelined sends (persistent sends nobody waits for) do not pass that seam; a failover
replay waits for its answer, so it does.
"""

from __future__ import annotations

import logging

from dovecote.broker.connection import ConnectionState
from dovecote.broker.plugins import BrokerPlugin, PluginHost
from dovecote.core.message import Message
from dovecote.store.api import PersistenceAdapter
from dovecote.store.producers import ProducerSequences, stored_sequences

log = logging.getLogger("dovecote.broker")


class ProducerAudit(BrokerPlugin):
    name = "producer-audit"

    def __init__(self, store: PersistenceAdapter) -> None:
        self._store = store
        self.sequences = ProducerSequences()
        self.dropped = 0
        """Duplicate sends dropped since the start (for tests and the log)."""

    async def start(self, broker: PluginHost) -> None:
        self.sequences = stored_sequences(self._store)
        log.info("producer audit: %d producers' sequences from the store", len(self.sequences))

    async def on_connect(self, state: ConnectionState) -> None:
        if state.send_audit is None:  # a network bridge's is audited by its own plugin
            state.send_audit = self.duplicate

    def duplicate(self, message: Message) -> bool:
        """True for a persistent send had already (the broker then drops it, answered)."""
        if not message.persistent:
            return False
        message_id = message.message_id
        producer, colon, sequence = message_id.rpartition(":")
        if not colon or not sequence.isdigit():
            return False
        if not self.sequences.seen(producer, int(sequence)):
            return False
        self.dropped += 1
        log.info("duplicate send of %s (producer's last sequence %d) dropped",
                    message_id, self.sequences.last(producer))  # fmt: skip
        return True
