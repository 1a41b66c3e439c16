"""The producer duplicate check (broker/producer_audit.py, store/producers.py) on every
store kind, from a real store directory: a persistent send whose message id (producer id,
producer sequence id) was stored before a restart, sent again after it (a failover
producer that lost its answer), is answered and not stored a second time; as ActiveMQ's
ProducerBrokerExchange.canDispatch with KahaDB's producerSequenceIdTracker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dovecote.broker.broker import Broker
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.producer_audit import ProducerAudit
from dovecote.core.commands import (
    ConnectionInfo,
    ConsumerInfo,
    MessageDispatch,
    SendMessage,
    SessionInfo,
    TransactionInfo,
    TransactionType,
)
from dovecote.core.destinations import queue, topic
from dovecote.core.ids import ConnectionId, ConsumerId, SessionId, TransactionId
from dovecote.core.message import Message
from dovecote.store.api import PersistenceAdapter
from dovecote.store.journal import JournalPersistenceAdapter
from dovecote.store.leveldb import LevelDBPersistenceAdapter
from dovecote.store.memory import MemoryPersistenceAdapter
from dovecote.store.producers import ProducerSequences, producer_sequence, stored_sequences
from dovecote.store.sql import SqlPersistenceAdapter
from dovecote.store.sql.journaled import JournaledSqlPersistenceAdapter

PRODUCER = "ID:host-1-1-1:1:1:1"
Q = queue("audited")


def journaled_sql(base: Path) -> PersistenceAdapter:
    sql = SqlPersistenceAdapter(f"sqlite:///{base / 'dovecote.db'}")
    return JournaledSqlPersistenceAdapter(base / "sql-journal", sql)


STORES: dict[str, Callable[[Path], PersistenceAdapter]] = {
    "journal": lambda base: JournalPersistenceAdapter(base / "journal"),
    "leveldb": lambda base: LevelDBPersistenceAdapter(base / "leveldb"),
    "sql": lambda base: SqlPersistenceAdapter(f"sqlite:///{base / 'dovecote.db'}"),
    "journaled-sql": journaled_sql,
}


def send(n: int, tx: TransactionId | None = None, persistent: bool = True) -> SendMessage:
    message = Message(f"{PRODUCER}:{n}", Q, f"m{n}".encode(), persistent=persistent)
    return SendMessage(message, transaction_id=tx)


class Client:
    """One connection to a broker, with a consumer whose dispatches are kept."""

    def __init__(self, broker: Broker, name: str) -> None:
        self.broker = broker
        self.connection = ConnectionId(f"ID:{name}")
        self.session = SessionId(self.connection, 1)
        self.got: list[MessageDispatch] = []
        self.consuming = False

    async def open(self) -> Client:
        info = ConnectionInfo(self.connection, client_id=self.connection.value)
        await self.broker.add_connection(info, self.got.append)
        await self.broker.process(self.connection, SessionInfo(self.session))
        return self

    async def consume(self) -> list[str]:
        """Consume (once) and say what was dispatched so far, by producer sequence."""
        if not self.consuming:
            self.consuming = True
            consumer = ConsumerInfo(ConsumerId(self.session, 1), Q)
            await self.broker.process(self.connection, consumer)
        return [d.message.message_id.rsplit(":", 1)[1] for d in self.got if d.message]


async def started(store: PersistenceAdapter) -> Broker:
    broker = Broker(
        BrokerSettings(expire_messages_period_ms=0), store, plugins=[ProducerAudit(store)]
    )
    await broker.start()
    return broker


@pytest.mark.parametrize("kind", sorted(STORES))
async def test_a_send_stored_before_a_restart_and_sent_again_is_stored_once(
    kind: str, tmp_path: Path
) -> None:
    broker = await started(STORES[kind](tmp_path))
    client = await Client(broker, "before").open()
    for n in (1, 2):
        await broker.process(client.connection, send(n))  # answered: no error
    await broker.stop()

    broker = await started(STORES[kind](tmp_path))  # the same directory
    try:
        client = await Client(broker, "after").open()
        assert await client.consume() == ["1", "2"]  # the consumer came back first
        await broker.process(client.connection, send(2))  # its answer was lost: sent again
        await broker.process(client.connection, send(3))
        assert await client.consume() == ["1", "2", "3"]
        assert broker.store.message_count(Q) == 3
    finally:
        await broker.stop()


async def test_the_memory_store_checks_within_its_life() -> None:
    store = MemoryPersistenceAdapter()
    broker = await started(store)
    try:
        client = await Client(broker, "c").open()
        for n in (1, 2, 2, 1, 3):
            await broker.process(client.connection, send(n))
        assert await client.consume() == ["1", "2", "3"]
    finally:
        await broker.stop()


async def test_a_duplicate_in_a_transaction_is_dropped_and_the_rest_commits(
    tmp_path: Path,
) -> None:
    broker = await started(LevelDBPersistenceAdapter(tmp_path))
    try:
        client = await Client(broker, "c").open()
        await broker.process(client.connection, send(1))
        tx = TransactionId(client.connection, "1")
        await broker.process(
            client.connection, TransactionInfo(client.connection, tx, TransactionType.BEGIN)
        )
        await broker.process(client.connection, send(1, tx))  # replayed into the transaction
        await broker.process(client.connection, send(2, tx))
        await broker.process(
            client.connection, TransactionInfo(client.connection, tx, TransactionType.COMMIT)
        )
        assert await client.consume() == ["1", "2"]
    finally:
        await broker.stop()


async def transacted(client: Client, key: str, sequences: list[int], commit: bool) -> None:
    tx = TransactionId(client.connection, key)
    broker = client.broker
    await broker.process(
        client.connection, TransactionInfo(client.connection, tx, TransactionType.BEGIN)
    )
    for n in sequences:
        await broker.process(client.connection, send(n, tx))
    if commit:
        await broker.process(
            client.connection, TransactionInfo(client.connection, tx, TransactionType.COMMIT)
        )


async def test_a_transaction_lost_with_its_connection_goes_through_when_replayed(
    tmp_path: Path,
) -> None:
    broker = await started(LevelDBPersistenceAdapter(tmp_path))
    try:
        lost = await Client(broker, "lost").open()
        await transacted(lost, "1", [1, 2], commit=False)
        await broker.remove_connection(lost.connection)  # rolled back with it
        replayed = await Client(broker, "replayed").open()
        await transacted(replayed, "1", [1, 2], commit=True)
        # A committed transaction whose answer was lost, replayed: nothing twice.
        again = await Client(broker, "again").open()
        await transacted(again, "2", [1, 2, 3], commit=True)
        assert await again.consume() == ["1", "2", "3"]
    finally:
        await broker.stop()


async def test_non_persistent_sends_are_not_checked() -> None:
    broker = await started(MemoryPersistenceAdapter())
    try:
        client = await Client(broker, "c").open()
        for n in (1, 1):
            await broker.process(client.connection, send(n, persistent=False))
        assert await client.consume() == ["1", "1"]
    finally:
        await broker.stop()


async def test_the_sequences_come_from_queues_and_topics_the_store_holds(tmp_path: Path) -> None:
    store = LevelDBPersistenceAdapter(tmp_path)
    broker = await started(store)
    try:
        client = await Client(broker, "c").open()
        # A durable subscription (not consuming): the topic message is stored for it.
        durable = ConsumerInfo(ConsumerId(client.session, 9), topic("t"), prefetch_size=0,
                               subscription_name="s")  # fmt: skip
        await broker.process(client.connection, durable)
        await broker.process(client.connection, send(4))
        other = Message("ID:other-1-1-1:1:1:1:7", topic("t"), b"x", persistent=True)
        await broker.process(client.connection, SendMessage(other))
    finally:
        await broker.stop()
    await store.start()
    try:
        sequences = stored_sequences(store)
        assert sequences.last(PRODUCER) == 4
        assert sequences.last("ID:other-1-1-1:1:1:1") == 7
        assert sequences.last("ID:unknown:1:1:1") == -1
    finally:
        await store.stop()


def test_ids_of_another_shape_are_not_tracked_and_the_oldest_producers_go() -> None:
    assert producer_sequence("ID:a:1:1:1:12") == ("ID:a:1:1:1", 12)
    assert producer_sequence("not-an-openwire-id") is None
    assert producer_sequence("ID:a:1:x") is None
    sequences = ProducerSequences(limit=2)
    sequences.note("a:1")
    sequences.note("b:1")
    sequences.note("a:2")
    sequences.note("c:1")  # a, the first to come, goes
    assert (sequences.last("a"), sequences.last("b"), sequences.last("c")) == (-1, 1, 1)
    assert sequences.seen("b:1") and not sequences.seen("b:3") and sequences.seen("b:2")
    assert not sequences.seen("no-sequence:x")


async def test_a_commit_notes_each_producers_highest_sequence_whatever_the_order() -> None:
    """A commit notes once per producer what noting each send in turn would leave."""
    store = MemoryPersistenceAdapter()
    audit = ProducerAudit(store)
    broker = Broker(BrokerSettings(expire_messages_period_ms=0), store, plugins=[audit])
    await broker.start()
    try:
        client = await Client(broker, "c").open()
        other = "ID:other-1-1-1:1:1:1"
        tx = TransactionId(client.connection, "1")
        await broker.process(
            client.connection, TransactionInfo(client.connection, tx, TransactionType.BEGIN)
        )
        sends = [f"{PRODUCER}:5", f"{PRODUCER}:7", f"{other}:9", f"{PRODUCER}:3",
                 f"{other}:2", "not-an-openwire-id", "ID:negative:1:1:1:-4"]  # fmt: skip
        for message_id in sends:
            message = Message(message_id, Q, b"x", persistent=True)
            await broker.process(client.connection, SendMessage(message, transaction_id=tx))
        await broker.process(
            client.connection, TransactionInfo(client.connection, tx, TransactionType.COMMIT)
        )
        each = ProducerSequences()
        for message_id in sends:
            each.note(message_id)
        for producer in (PRODUCER, other, "ID:negative:1:1:1", "not-an-openwire-id"):
            assert audit.sequences.last(producer) == each.last(producer)
        assert audit.sequences.last(PRODUCER) == 7 and audit.sequences.last(other) == 9
        for n in (7, 6, 8):  # sent again after the commit: 7 and 6 are duplicates
            await broker.process(client.connection, send(n))
        assert audit.dropped == 2
        assert audit.sequences.last(PRODUCER) == 8
    finally:
        await broker.stop()
