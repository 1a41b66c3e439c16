"""A queue's stored messages the store cannot read now (its index held back by a full disk)
wait in the store: the page-in gives up for now, says so once, and reads them on a later
try, instead of raising into whichever connection set the dispatch off."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dovecote.broker.policy import BrokerSettings
from dovecote.broker.regions import Regions
from dovecote.core.destinations import Destination, queue
from dovecote.core.errors import StoreFailedError
from dovecote.core.message import Message
from dovecote.store.api import PagedRecovery, QueuePage, QueuePosition

Q = queue("stored")


class StoreThatCannotReadYet:
    """A paging store whose reads fail until ``readable`` is set."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.readable = False
        self.reads = 0

    def recover_paged(self) -> PagedRecovery:
        return PagedRecovery()

    def read_queue(self, destination: Destination, start: QueuePosition, limit: int) -> QueuePage:
        self.reads += 1
        if not self.readable:
            raise StoreFailedError("the store's index could not be updated: No space left")
        return QueuePage(self.messages[:limit], (self.messages[-1].sequence + 1, 0))


def test_an_unreadable_store_leaves_the_messages_waiting_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    messages = [Message(f"m{i}", Q, persistent=True, sequence=i + 1) for i in range(3)]
    store = StoreThatCannotReadYet(messages)
    regions = Regions(BrokerSettings(temp_directory=tmp_path / "tmp"), store)  # type: ignore[arg-type]
    held = regions.queue(Q)
    for message in messages:
        held.hold_stored(message)
    with caplog.at_level(logging.WARNING, logger="dovecote.broker"):
        for _ in range(3):
            regions.paging.page_in(held)  # raised StoreFailedError before
    assert store.reads == 3
    assert held.stored == 3 and held.pending_count == 0
    warned = [r for r in caplog.records if "cannot be read now" in r.getMessage()]
    assert len(warned) == 1
    store.readable = True
    regions.paging.page_in(held)
    assert held.stored == 0
    assert [e.message_id for e in held.pending_entries()] == ["m0", "m1", "m2"]
