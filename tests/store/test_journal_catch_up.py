"""A large catch-up of the journal's index (a Spark batch's commit: 25,000 removals) is applied
a slice at a time in one transaction, the event loop's other work between slices
(store/journal/catchup.py)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contract import Q, msg

from dovecote.store.api import AddMessage, RemoveMessage
from dovecote.store.journal import JournalPersistenceAdapter
from dovecote.store.journal.catchup import (
    CATCH_UP_SLICE_OPS,
    INDEX_HOLD_ADDS,
    INDEX_HOLD_BYTES,
    slices,
)
from dovecote.store.journal.datafiles import Location

REMOVED = 5 * CATCH_UP_SLICE_OPS


def test_slices_keep_each_operation_once_in_order_and_cut_large_records() -> None:
    records: list[tuple[Location, list[Any]]] = [
        (Location(1, 0), list(range(3))),
        (Location(1, 100), []),
        (Location(1, 200), list(range(3, 15))),
        (Location(2, 0), list(range(15, 17))),
    ]
    cut = slices(records, 5)
    assert all(sum(len(ops) for _, ops in piece) <= 5 for piece in cut)
    assert [op for piece in cut for _, ops in piece for op in ops] == list(range(17))
    # Each part keeps its record's location; the empty record is kept (its file is noted).
    assert [loc for piece in cut for loc, _ in piece] == [Location(1, 0), Location(1, 100)] + [
        Location(1, 200)
    ] * 3 + [Location(2, 0)]
    assert slices(records, 0) == [records]


async def removals_being_applied(
    tmp_path: Path, at_a_pause: Callable[[JournalPersistenceAdapter], Any]
) -> tuple[JournalPersistenceAdapter, int]:
    """A store holding ``REMOVED`` messages, then a write removing them all; ``at_a_pause``
    runs at the first turn of the loop that finds the writer's catch-up of that removal
    between two slices. Returns the store and how many turns found it so."""
    store = JournalPersistenceAdapter(tmp_path / "journal", index_delay_s=60)
    await store.start()
    assert store._index is not None and store._files is not None
    await store.write([AddMessage(msg(i)) for i in range(REMOVED)])
    assert store.message_count(Q) == REMOVED  # (the index caught up)
    await store.write([RemoveMessage(Q, msg(i).message_id) for i in range(REMOVED)])
    between = 0
    for _ in range(10_000):  # the loop's turns while the writer catches up
        if store._catching_up is not None:
            between += 1
            if between == 1:
                await at_a_pause(store)
        if store._index.applied() == store._files.head:
            break
        await asyncio.sleep(0)
    return store, between


async def test_a_large_catch_up_lets_the_loop_work_between_its_slices(tmp_path: Path) -> None:
    async def nothing(store: JournalPersistenceAdapter) -> None:
        pass

    store, between = await removals_being_applied(tmp_path, nothing)
    # The loop ran while some slices were applied and others were still to come: a turn
    # between each two of them.
    assert between >= REMOVED // CATCH_UP_SLICE_OPS - 1
    assert store.message_count(Q) == 0
    await store.stop()
    again = JournalPersistenceAdapter(tmp_path / "journal")
    await again.start()
    assert again.message_count(Q) == 0
    assert again.recover().queues.get(Q, []) == []
    await again.stop()


async def test_a_read_between_slices_finishes_the_catch_up_first(tmp_path: Path) -> None:
    counts: list[int] = []

    async def read(store: JournalPersistenceAdapter) -> None:
        counts.append(store.message_count(Q))
        assert store._files is not None and store._index is not None
        assert store._index.applied() == store._files.head

    store, _ = await removals_being_applied(tmp_path, read)
    assert counts == [0]
    # The writer, resumed, finds its catch-up done; the store goes on as before.
    await store.write([AddMessage(msg(REMOVED + 1))])
    assert store.message_count(Q) == 1
    await store.stop()


async def test_a_crash_between_slices_leaves_the_whole_catch_up_to_the_replay(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "crashed"

    async def crash(store: JournalPersistenceAdapter) -> None:
        # The files as a kill -9 would leave them now: the journal written and synced, the
        # index's transaction open (nothing of it committed).
        shutil.copytree(
            tmp_path / "journal", copy, ignore=shutil.ignore_patterns("lock", "lock.mdb")
        )

    store, _ = await removals_being_applied(tmp_path, crash)
    await store.stop()
    assert copy.exists()  # (taken between two slices)
    crashed = JournalPersistenceAdapter(copy)
    await crashed.start()
    assert crashed._index is not None
    assert crashed.message_count(Q) == 0
    assert crashed.recover().queues.get(Q, []) == []
    await crashed.write([AddMessage(msg(REMOVED + 1))])
    assert [m.message_id for m in crashed.recover().queues[Q]] == [msg(REMOVED + 1).message_id]
    await crashed.stop()


async def test_a_commit_queued_behind_a_large_catch_up_is_written_before_it(
    tmp_path: Path,
) -> None:
    """A group someone waits for (a Spark write's other partition committing) is written
    before the index catches up with a large group just written; the catch-up then applies
    both in one transaction. (No bulk load's hold: that would wait for consumers.)"""
    no_hold = (INDEX_HOLD_ADDS, 0.0, INDEX_HOLD_BYTES)
    store = JournalPersistenceAdapter(tmp_path / "journal", index_delay_s=60, index_hold=no_hold)
    await store.start()
    try:
        assert store._index is not None and store._files is not None
        large = [AddMessage(msg(i)) for i in range(REMOVED)]
        await store.write(large)
        # The writer is now at the catch-up's start; this commit comes as it is.
        await store.write([AddMessage(msg(REMOVED))])
        assert store._waiting.ops == REMOVED + 1  # written before the catch-up
        for _ in range(10_000):
            if store._index.applied() == store._files.head:
                break
            await asyncio.sleep(0)
        assert store._waiting.ops == 0
        assert store.message_count(Q) == REMOVED + 1
    finally:
        await store.stop()
