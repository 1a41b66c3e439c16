"""The highest producer sequence id a store holds for each producer: ActiveMQ's
producerSequenceIdTracker (KahaDB's ActiveMQMessageAuditNoSync, answered by
``PersistenceAdapter.getLastProducerSequenceId``), rebuilt at start from what the store
holds. The broker's duplicate check (broker/producer_audit.py) starts from it.

A message id is its producer's id and that producer's sequence id, ``<producer>:<n>``
(an OpenWire MessageId's text); an id of another shape (none of ours) is not tracked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from dovecote.store.api import PagingStore, PersistenceAdapter

MAX_PRODUCERS = 10_000
"""Producers remembered, the oldest forgotten first (ActiveMQ tracks 64 in an LRU map:
maxFailoverProducersToTrack). One dict entry each, so more than ActiveMQ's."""
PAGE = 1000


def producer_sequence(message_id: str) -> tuple[str, int] | None:
    """(producer id, producer sequence id) of a message id, or None for another shape."""
    producer, colon, sequence = message_id.rpartition(":")
    if not colon or not sequence.isdigit():
        return None
    return producer, int(sequence)


class ProducerSequences:
    """The last sequence id seen per producer, for the last ``limit`` producers to come."""

    def __init__(self, limit: int = MAX_PRODUCERS) -> None:
        self.limit = limit
        self._last: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._last)

    def last(self, producer_id: str) -> int:
        """-1 for a producer not seen (as ActiveMQ's getLastSeqId)."""
        return self._last.get(producer_id, -1)

    def note(self, message_id: str) -> None:
        self.seen(message_id)

    def holds(self, message_id: str) -> bool:
        """Whether ``seen`` would call this id a duplicate, noting nothing."""
        producer, _, sequence = message_id.rpartition(":")
        last = self._last.get(producer)
        return last is not None and sequence.isdigit() and int(sequence) <= last

    def seen(self, message_id: str) -> bool:
        """Note a message id; True when its sequence is not above its producer's last one
        (a duplicate: the last one stays). Called for every persistent send: kept short
        (no LRU reordering; a producer is forgotten ``limit`` new producers after it came)."""
        producer, _, sequence = message_id.rpartition(":")
        try:
            number = int(sequence)
        except ValueError:
            return False  # not an OpenWire id: nothing to track
        last = self._last.get(producer)
        if last is None:
            if len(self._last) >= self.limit:
                del self._last[next(iter(self._last))]
            self._last[producer] = number
            return False
        if number > last:
            self._last[producer] = number
            return False
        return True


@runtime_checkable
class MessageIdIndex(Protocol):
    """A store that can list the ids of the messages it holds without reading them (its
    keys name them): LevelDB, the replicated store, the journal's index."""

    def stored_message_ids(self) -> Iterable[str]: ...


def stored_sequences(store: PersistenceAdapter, limit: int = MAX_PRODUCERS) -> ProducerSequences:
    """The sequences of every message the store holds (queues and topics), as recovery
    rebuilds KahaDB's tracker. Called once the store is started and the broker recovered."""
    sequences = ProducerSequences(limit)
    for message_id in _message_ids(store):
        sequences.note(message_id)
    return sequences


def _message_ids(store: PersistenceAdapter) -> Iterable[str]:
    if isinstance(store, MessageIdIndex):
        yield from store.stored_message_ids()
        return
    if isinstance(store, PagingStore):  # (none left without an index of ids; for others)
        paged = store.recover_paged()
        for destination in paged.queues:
            start = (0, 0)
            while True:
                page = store.read_queue(destination, start, PAGE)
                if not page.messages:
                    break
                for message in page.messages:
                    yield message.message_id
                start = page.next
        subscriptions = paged.subscriptions
    else:  # the memory and SQL stores: recovery reads every message anyway
        state = store.recover()
        for messages in state.queues.values():
            for message in messages:
                yield message.message_id
        subscriptions = state.subscriptions
    for subscription in subscriptions:
        for message in subscription.pending:
            yield message.message_id
