"""A bulk load holds the journal index's catch-up back (store/journal/catchup.py,
INDEX_HOLD_*): the index stays behind the journal until the hold's time passes, something
reads the index, or the records waiting pass the hold's size; a crash meanwhile replays them.
Small holds here: 100 adds make a bulk load."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from contract import Q, msg
from journal_crash import crash

from dovecote.core.destinations import Destination, DestinationType
from dovecote.core.message import Message
from dovecote.store.api import AddMessage, RemoveDestination, RemoveMessage
from dovecote.store.journal import JournalPersistenceAdapter
from dovecote.store.journal.catchup import CATCH_UP_SLICE_OPS
from dovecote.store.journal.datafiles import Location

BULK = 100
DELAY_S = 0.01
"""The index's usual wait (catchup.INDEX_DELAY_S is 20 ms): a group not held is applied after
this long."""


def sent(i: int) -> Message:
    return replace(msg(i), sequence=i + 1)


async def open_store(
    directory: Path, hold_s: float = 60.0, hold_bytes: int = 1 << 30
) -> JournalPersistenceAdapter:
    store = JournalPersistenceAdapter(
        directory, index_delay_s=DELAY_S, index_hold=(BULK, hold_s, hold_bytes)
    )
    await store.start()
    return store


def applied(store: JournalPersistenceAdapter) -> Location | None:
    assert store._index is not None
    return store._index.applied()


def head(store: JournalPersistenceAdapter) -> Location:
    assert store._files is not None
    return store._files.head


async def until(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    """Poll ``condition`` on the loop for up to ``seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.005)
    return True


async def test_a_bulk_load_and_its_consumption_wait_for_the_hold_to_end(tmp_path: Path) -> None:
    store = await open_store(tmp_path, hold_s=0.5)
    messages = [sent(i) for i in range(BULK + 50)]
    before = applied(store)
    await store.write([AddMessage(m) for m in messages])
    # Many times the usual wait: not applied (a group of fewer adds would have been).
    assert not await until(lambda: applied(store) != before, seconds=20 * DELAY_S)
    await store.write([RemoveMessage(Q, m.message_id) for m in messages[:BULK]])
    await store.write([AddMessage(sent(1000))])  # a small group waits with them
    assert applied(store) == before
    # The hold's time passes: everything is applied, as it would have been one by one.
    assert await until(lambda: applied(store) == head(store))
    assert store.message_count(Q) == 51
    kept = store.read_queue(Q, (0, 0), 100).messages
    assert kept == [*messages[BULK:], sent(1000)]
    await store.write([AddMessage(sent(1001))])  # after it, the usual wait again
    assert await until(lambda: applied(store) == head(store), seconds=1.0)
    await store.stop()


async def test_a_hold_ends_once_its_messages_are_consumed(tmp_path: Path) -> None:
    """As many removals as adds waiting (a Spark stream's last batch committed): the catch-up
    comes then, not at the hold's end; removing fewer, it waits."""
    store = await open_store(tmp_path, hold_s=60.0)
    messages = [sent(i) for i in range(2 * BULK)]
    await store.write([AddMessage(m) for m in messages[:BULK]])
    await store.write([AddMessage(m) for m in messages[BULK:]])
    await store.write([RemoveMessage(Q, m.message_id) for m in messages[: BULK + 50]])
    assert not await until(lambda: applied(store) == head(store), seconds=20 * DELAY_S)
    await store.write([RemoveMessage(Q, m.message_id) for m in messages[BULK + 50 :]])
    assert await until(lambda: applied(store) == head(store), seconds=1.0)
    assert store.message_count(Q) == 0
    await store.stop()


async def test_a_small_group_is_not_held(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    await store.write([AddMessage(sent(i)) for i in range(BULK - 1)])
    assert await until(lambda: applied(store) == head(store), seconds=1.0)
    await store.stop()


async def test_a_read_of_the_index_ends_a_hold(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    messages = [sent(i) for i in range(BULK)]
    await store.write([AddMessage(m) for m in messages])
    await store.write([RemoveMessage(Q, messages[0].message_id)])
    assert applied(store) != head(store)
    assert store.message_count(Q) == BULK - 1
    assert applied(store) == head(store)
    assert store.read_queue(Q, (0, 0), 10).messages == messages[1:11]
    await store.stop()


async def test_past_its_size_a_hold_applies_what_came_before_its_latest_bulk_load(
    tmp_path: Path,
) -> None:
    first = [sent(i) for i in range(BULK)]
    second = [sent(i) for i in range(BULK, 2 * BULK)]
    probe = await open_store(tmp_path / "probe")
    await probe.write([AddMessage(m) for m in first])
    one_load = head(probe).offset - applied(probe).offset  # type: ignore[union-attr]
    await probe.stop()
    # Room for one bulk load and what follows it, not for two.
    store = await open_store(tmp_path / "journal", hold_bytes=one_load * 3 // 2)
    start = applied(store)
    await store.write([AddMessage(m) for m in first])
    await store.write([RemoveMessage(Q, m.message_id) for m in first[:10]])
    second_starts = head(store)
    await store.write([AddMessage(m) for m in second])
    # The first load and its removals are applied; the hold goes on with the second.
    assert await until(lambda: applied(store) != start)
    assert applied(store) == second_starts
    assert not await until(lambda: applied(store) == head(store), seconds=20 * DELAY_S)
    assert store.message_count(Q) == 2 * BULK - 10
    assert store.read_queue(Q, (0, 0), 2 * BULK).messages == first[10:] + second
    await store.stop()


async def test_a_crash_in_a_hold_replays_what_it_held(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path)
    messages = [sent(i) for i in range(BULK + 20)]
    await store.write([AddMessage(m) for m in messages])
    await store.write([RemoveMessage(Q, m.message_id) for m in messages[:BULK]])
    assert not await until(lambda: applied(store) == head(store), seconds=20 * DELAY_S)
    # A crash: written and fsynced, never applied to the index, the index never closed.
    await crash(store)
    caplog.set_level(logging.INFO)
    again = await open_store(tmp_path)
    assert "replay applied 2 records" in caplog.text
    assert again.message_count(Q) == 20
    assert again.read_queue(Q, (0, 0), 100).messages == messages[BULK:]
    await again.stop()


@pytest.mark.parametrize("client_left", [False, True], ids=["", "a temporary queue removed"])
async def test_a_bulk_load_consumed_in_its_hold_never_reaches_the_index(
    tmp_path: Path, client_left: bool
) -> None:
    """Its adds and removals meet in one catch-up, applied in many slices (more operations than
    CATCH_UP_SLICE_OPS): they cancel out across the slices, and the index's file does not grow
    by the pages their entries would have taken. Finding them is done by slices too. A client
    disconnecting in between (its temporary queue removed, as the writer's connection does
    after a Spark write) changes nothing for them."""
    store = await open_store(tmp_path, hold_s=0.3)
    assert store._index is not None
    await store.write([AddMessage(sent(0))])  # (the index's tables made)
    assert await until(lambda: applied(store) == head(store))
    pages = store._index.env.info()["last_pgno"]
    messages = [sent(i) for i in range(1, 3 * CATCH_UP_SLICE_OPS)]
    await store.write([AddMessage(m) for m in messages])
    if client_left:
        replies = Destination(DestinationType.TEMP_QUEUE, "ID:a-spark-writer-1:1")
        await store.write([RemoveDestination(replies)])
    for i in range(0, len(messages), 1000):  # consumed, acknowledged a thousand at a time
        await store.write([RemoveMessage(Q, m.message_id) for m in messages[i : i + 1000]])
    between = 0  # the loop's turns while the catch-up is under way
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while applied(store) != head(store) and loop.time() < deadline:
        between += store._catching_up is not None
        await asyncio.sleep(0)
    assert applied(store) == head(store)
    # A turn between each two slices: of the search for the pairs, then of applying the rest.
    ops = 2 * len(messages)
    assert between >= 2 * (ops // CATCH_UP_SLICE_OPS)
    # (Applied, their entries took ~150 pages; the catch-up's own writes take a few.)
    assert store._index.env.info()["last_pgno"] - pages < 20
    assert store.message_count(Q) == 1
    assert store._index.last_seq() == 1 + len(messages)  # the seqs still move past them
    await store.stop()
