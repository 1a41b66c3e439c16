"""The producer duplicate check (compatibility M8): a persistent send whose message id
(producer id, producer sequence id) is not above the last one had from that producer is
dropped and answered as stored, so a send a failover client replays after losing its answer
is not stored twice.

ActiveMQ does this in two places: the connection's ProducerBrokerExchange.canDispatch
drops a persistent send at or below the producer's last sequence (the store's
getLastProducerSequenceId for a failover reconnect), and answers it as any send; KahaDB
refuses to add a message id a destination holds ("Duplicate message add attempt
rejected"), for any connection. Here one check does both, for every connection but a
network bridge's (the network plugin's audit handles those), whatever the store kind: it
starts from what the store holds (store/producers.py: a promoted replicated slave holds
the master's keys) and notes every persistent send after. A duplicate in a transaction is
dropped too (ActiveMQ logs it as a warning): it is not part of the transaction. A
transaction's sends are noted when it commits, as KahaDB's tracker sees them only then: a
transaction lost with its connection and replayed by a failover client goes through.

It hangs on the connection's ``send_audit`` (the seam the network audit uses), which the
broker tests on every send anyway: one call per send, no await (about 0.4 us). Sends
nobody waits for, batched by the transports, do not pass that seam; a failover replay
waits for its answer, so it does. Limit: the rebuild knows only the messages the store
still holds; one stored, consumed and then sent again across a restart or a takeover
(its answer lost after its consumer's ack) is not recognised (KahaDB's tracker would
know it from its journal).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from dovecote.broker.connection import ConnectionState, LocalTransaction
from dovecote.broker.plugins import BrokerPlugin, PluginHost
from dovecote.core.ids import highest_sequences
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
        # Not a network bridge's: it forwards many producers' messages, each destination's
        # in its own order (the network plugin audits those).
        if state.send_audit is None and state.info.network_broker_id is None:
            state.send_audit = self._audit(state)

    def _audit(self, state: ConnectionState) -> Callable[[Message], bool]:
        transactions = state.transactions

        def duplicate(message: Message) -> bool:
            """True for a persistent send had already (the broker drops it, answered)."""
            if not message.persistent:
                return False
            if transactions:
                # It may belong to a transaction, which may not commit (a replay of one lost
                # with its connection must go through): checked now, noted at the commit.
                if not self.sequences.holds(message.message_id):
                    return False
            elif not self.sequences.seen(message.message_id):
                return False
            self.dropped += 1
            log.info("a duplicate send of %s dropped (its producer sent that sequence id or a "
                     "later one before)", message.message_id)  # fmt: skip
            return True

        return duplicate

    async def after_commit(self, state: ConnectionState, tx: LocalTransaction) -> None:
        # Each producer's highest sequence in the transaction is noted, once: what noting
        # every send would leave (a Spark partition's commit holds 100,000 of them).
        ids = [message.message_id for message in tx.sends if message.persistent]
        for producer, sequence in highest_sequences(ids).items():
            self.sequences.note(f"{producer}:{sequence}")
