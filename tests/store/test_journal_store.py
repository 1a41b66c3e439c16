"""The journal adapter against the store contract, then its own cases: restarts, torn and
damaged tails, a damaged index, file roll and removal, compaction, the lock, group commit."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from contract import Q, StoreContract, msg
from journal_crash import crash

from dovecote.core.destinations import parse_destination
from dovecote.store.api import (
    AddMessage,
    PersistenceAdapter,
    RemoveMessage,
    StoredQueue,
    UpdateRedelivery,
)
from dovecote.store.journal import JournalPersistenceAdapter, compaction
from dovecote.store.journal.records import SMALL_BATCH_OPS, group_records


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[PersistenceAdapter]:
    adapter = JournalPersistenceAdapter(tmp_path / "journal")
    await adapter.start()
    yield adapter
    await adapter.stop()


@pytest.fixture
def reopen(tmp_path: Path):  # type: ignore[no-untyped-def]
    async def again(adapter: PersistenceAdapter) -> PersistenceAdapter:
        # A new adapter over the same directory: what a broker restart sees.
        await adapter.stop()
        fresh = JournalPersistenceAdapter(tmp_path / "journal")
        await fresh.start()
        return fresh

    return again


class TestJournalStore(StoreContract):
    pass


async def open_store(directory: Path, **options: object) -> JournalPersistenceAdapter:
    adapter = JournalPersistenceAdapter(directory, **options)  # type: ignore[arg-type]
    await adapter.start()
    return adapter


def ids(adapter: JournalPersistenceAdapter) -> list[str]:
    return [m.message_id for m in adapter.recover().queues.get(Q, [])]


async def test_torn_tail_recovers_to_the_last_good_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path)
    for i in range(5):
        await store.write([AddMessage(msg(i))])
    await store.stop()
    log_file = tmp_path / "db-1.log"
    size = log_file.stat().st_size
    with log_file.open("r+b") as f:
        f.truncate(size - 7)  # cut the last record mid-way
    caplog.set_level(logging.WARNING)
    store = await open_store(tmp_path)
    assert ids(store) == [msg(i).message_id for i in range(4)]
    assert "record cut short" in caplog.text
    await store.write([AddMessage(msg(9))])  # new writes follow the last good record
    await store.stop()
    store = await open_store(tmp_path)
    assert ids(store)[-1] == msg(9).message_id
    await store.stop()


async def test_a_crashed_brokers_preallocated_file_ends_at_its_zeros(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    length = 1 << 20
    store = await open_store(tmp_path, max_file_length=length)
    for i in range(3):
        await store.write([AddMessage(msg(i))])
    log_file = tmp_path / "db-1.log"
    assert log_file.stat().st_size == length  # preallocated while in use
    crashed = log_file.read_bytes()  # what a kill -9 leaves: the records, then zeros
    await store.stop()
    assert log_file.stat().st_size < 4096  # a clean stop gives the rest back
    log_file.write_bytes(crashed)
    caplog.set_level(logging.WARNING)
    store = await open_store(tmp_path, max_file_length=length)
    assert ids(store) == [msg(i).message_id for i in range(3)]
    await store.write([AddMessage(msg(3))])  # after the last record, not after the zeros
    crashed = log_file.read_bytes()
    await store.stop()
    log_file.write_bytes(crashed)
    for path in (tmp_path / "index").iterdir():
        path.unlink()  # a full replay also stops at the zeros
    store = await open_store(tmp_path, max_file_length=length)
    assert ids(store) == [msg(i).message_id for i in range(4)]
    assert caplog.text == ""  # the end of the data is not damage
    await store.stop()


async def test_garbage_tail_recovers_to_the_last_good_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path)
    for i in range(3):
        await store.write([AddMessage(msg(i))])
    await store.stop()
    with (tmp_path / "db-1.log").open("ab") as f:
        f.write(os.urandom(200))
    # The index already saw all three; make the store replay everything to meet the garbage.
    for path in (tmp_path / "index").iterdir():
        path.unlink()
    caplog.set_level(logging.WARNING)
    store = await open_store(tmp_path)
    assert ids(store) == [msg(i).message_id for i in range(3)]
    assert "db-1.log" in caplog.text
    await store.stop()


async def test_overwritten_record_is_detected_by_its_checksum(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path)
    for i in range(3):
        await store.write([AddMessage(msg(i))])
    await store.stop()
    data = bytearray((tmp_path / "db-1.log").read_bytes())
    data[-5] ^= 0xFF  # flip a byte inside the last record's payload
    (tmp_path / "db-1.log").write_bytes(bytes(data))
    for path in (tmp_path / "index").iterdir():
        path.unlink()
    caplog.set_level(logging.WARNING)
    store = await open_store(tmp_path)
    assert ids(store) == [msg(0).message_id, msg(1).message_id]
    assert "checksum mismatch" in caplog.text
    await store.stop()


async def test_damaged_index_is_rebuilt_from_the_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path)
    for i in range(10):
        await store.write([AddMessage(msg(i))])
    await store.write([RemoveMessage(Q, msg(3).message_id)])
    await store.stop()
    (tmp_path / "index" / "data.mdb").write_bytes(os.urandom(8192))
    caplog.set_level(logging.WARNING)
    store = await open_store(tmp_path)
    assert ids(store) == [msg(i).message_id for i in range(10) if i != 3]
    assert "rebuilding" in caplog.text
    await store.stop()


async def test_only_the_tail_is_replayed_after_a_checkpointed_index(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path)
    for i in range(20):
        await store.write([AddMessage(msg(i))])
    await store.stop()
    caplog.set_level(logging.INFO)
    store = await open_store(tmp_path)
    assert "replay applied" not in caplog.text  # the index had everything
    assert len(ids(store)) == 20
    await store.stop()


async def test_files_roll_and_consumed_files_are_removed(tmp_path: Path) -> None:
    # index_delay_s=0: the index catches up after every group, and the checkpoint with it.
    store = await open_store(tmp_path, max_file_length=4096, index_delay_s=0)
    for i in range(150):
        await store.write([AddMessage(msg(i))])
    files = sorted(p.name for p in tmp_path.glob("db-*.log"))
    assert len(files) > 3
    await store.write([RemoveMessage(Q, msg(i).message_id) for i in range(150)])
    await store.write([AddMessage(msg(100))])  # a write runs the checkpoint
    remaining = sorted(p.name for p in tmp_path.glob("db-*.log"))
    assert len(remaining) <= 2 and "db-1.log" not in remaining
    await store.stop()
    store = await open_store(tmp_path, max_file_length=4096)
    assert ids(store) == [msg(100).message_id]
    await store.stop()


async def test_a_few_old_messages_do_not_pin_old_files(tmp_path: Path) -> None:
    store = await open_store(tmp_path, max_file_length=4096, index_delay_s=0)
    await store.write([AddMessage(msg(0))])  # a message nobody consumes, in db-1
    for i in range(1, 150):
        await store.write([AddMessage(msg(i))])
        await store.write([RemoveMessage(Q, msg(i).message_id)])
    for _ in range(3):  # let compaction move the old one and the next checkpoint delete
        await store.write([AddMessage(msg(1000)), RemoveMessage(Q, msg(1000).message_id)])
        await asyncio.sleep(0)
    assert not (tmp_path / "db-1.log").exists()
    assert len(list(tmp_path.glob("db-*.log"))) <= 3
    await store.stop()
    store = await open_store(tmp_path, max_file_length=4096)
    assert ids(store) == [msg(0).message_id]
    await store.stop()


async def test_old_messages_of_one_record_are_moved_with_one_decode_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A transaction's sends are one record; a record of 100k messages decoded once per live
    # message it holds was minutes of the broker's loop.
    store = await open_store(tmp_path, max_file_length=4096, index_delay_s=0)
    await store.write([AddMessage(msg(i)) for i in range(5)])  # one record in db-1
    decodes: list[int] = []
    real = compaction.added_messages

    def counted(payload: bytes) -> Any:
        decodes.append(len(payload))
        return real(payload)

    monkeypatch.setattr(compaction, "added_messages", counted)
    for i in range(100, 250):
        await store.write([AddMessage(msg(i))])
        await store.write([RemoveMessage(Q, msg(i).message_id)])
    for _ in range(3):  # let compaction move the old ones and the next checkpoint delete
        await store.write([AddMessage(msg(1000)), RemoveMessage(Q, msg(1000).message_id)])
        await asyncio.sleep(0)
    assert not (tmp_path / "db-1.log").exists()
    # Once per compaction pass that met the record (it may meet it again before the
    # checkpoint drops db-1), not once per message: five at least.
    assert 1 <= len(decodes) <= 2
    await store.stop()
    store = await open_store(tmp_path, max_file_length=4096)
    assert ids(store) == [msg(i).message_id for i in range(5)]
    await store.stop()


async def test_a_backlog_that_fills_the_old_files_is_not_written_again(tmp_path: Path) -> None:
    # Messages nobody has taken yet fill the oldest files. Moving them to the head would free
    # nothing (they fill the new files as they filled the old) and, done again after every
    # group, wrote the backlog over and over: a 100 KiB backlog fell to ~16 msg/s at 100% CPU.
    store = await open_store(tmp_path, max_file_length=16 * 1024, index_delay_s=0)
    body = b"x" * 1000
    for i in range(100):
        await store.write([AddMessage(replace(msg(i), body=body))])
    files = sorted(tmp_path.glob("db-*.log"))
    assert len(files) >= 5 and files[0].name == "db-1.log"
    journal_bytes = sum(p.stat().st_size for p in files)
    assert journal_bytes < 100 * 1500, journal_bytes  # each message (~1.24 KB) written once
    await store.stop()
    store = await open_store(tmp_path, max_file_length=16 * 1024)
    assert ids(store) == [msg(i).message_id for i in range(100)]
    await store.stop()


async def test_long_lived_messages_filling_the_oldest_file_do_not_pin_the_journal(
    tmp_path: Path,
) -> None:
    # The other way round from the test above: the old file is full of messages nobody takes
    # (a DLQ, say) while the traffic after them is consumed. Left there, they would keep every
    # newer file too, and the journal would grow for ever; once it is mostly dead they move.
    store = await open_store(tmp_path, max_file_length=16 * 1024, index_delay_s=0)
    body = b"x" * 1000
    for i in range(10):  # ~12 KB of db-1's 16, never consumed
        await store.write([AddMessage(replace(msg(i), body=body))])
    for i in range(10, 400):
        await store.write([AddMessage(replace(msg(i), body=body))])
        await store.write([RemoveMessage(Q, msg(i).message_id)])
    assert not (tmp_path / "db-1.log").exists()
    assert len(list(tmp_path.glob("db-*.log"))) <= 6  # ~4x what is live, not 400 KB's worth
    await store.stop()
    store = await open_store(tmp_path, max_file_length=16 * 1024)
    assert ids(store) == [msg(i).message_id for i in range(10)]
    await store.stop()


async def test_a_few_old_messages_among_many_small_ones_are_moved(tmp_path: Path) -> None:
    # The other side of the test above: live messages that are a small part of their file are
    # still moved, so that the file can go.
    store = await open_store(tmp_path, max_file_length=16 * 1024, index_delay_s=0)
    await store.write([AddMessage(msg(0))])  # small, and nobody consumes it, in db-1
    body = b"x" * 1000
    for i in range(1, 100):
        await store.write([AddMessage(replace(msg(i), body=body))])
        await store.write([RemoveMessage(Q, msg(i).message_id)])
    assert not (tmp_path / "db-1.log").exists()
    await store.stop()
    store = await open_store(tmp_path, max_file_length=16 * 1024)
    assert ids(store) == [msg(0).message_id]
    await store.stop()


async def test_second_store_waits_for_the_lock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    master = await open_store(tmp_path)
    await master.write([AddMessage(msg(1))])
    slave = JournalPersistenceAdapter(tmp_path)
    starting = asyncio.create_task(slave.start())
    while "waiting as a slave" not in caplog.text:
        await asyncio.sleep(0.05)
    assert not starting.done()
    await master.stop()
    await asyncio.wait_for(starting, 10)
    assert ids(slave) == [msg(1).message_id]
    await slave.stop()


async def test_concurrent_writers_share_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await open_store(tmp_path)
    syncs = 0
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        nonlocal syncs
        syncs += 1
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    await asyncio.gather(*(store.write([AddMessage(msg(i))]) for i in range(50)))
    assert syncs < 50 // 2, syncs  # group commit: far fewer fsyncs than writes
    assert len(ids(store)) == 50
    await store.stop()


async def test_disk_syncs_off_never_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = await open_store(tmp_path, disk_syncs=False)
    calls: list[int] = []
    monkeypatch.setattr(os, "fsync", calls.append)
    for i in range(5):
        await store.write([AddMessage(msg(i))])
    assert calls == []
    await store.stop()


async def test_unsynced_writes_are_synced_by_the_next_synced_one(
    tmp_path: Path, log_fsyncs: list[str]
) -> None:
    store = await open_store(tmp_path, max_file_length=8192)
    calls = log_fsyncs  # the data files fsynced (a new file also syncs its directory)
    await store.write([AddMessage(msg(0))])
    synced = len(calls)
    assert synced >= 1
    # Acks nobody waits for: no fsync, even across a file roll...
    for i in range(1, 12):
        await store.write([AddMessage(replace(msg(i), body=b"x" * 1000))], sync=False)
    assert len(calls) == synced
    # ...until a write that needs one: it covers every file written meanwhile.
    await store.write([AddMessage(msg(99))])
    files = sorted(tmp_path.glob("db-*.log"))
    assert len(files) > 1
    assert len(calls) - synced >= 2  # the rolled file and the current one
    assert ids(store)[-1] == msg(99).message_id
    await store.stop()


async def test_a_clean_stop_syncs_what_was_written_unsynced(
    tmp_path: Path, log_fsyncs: list[str]
) -> None:
    store = await open_store(tmp_path)
    await store.write([AddMessage(msg(1))], sync=False)
    assert log_fsyncs == []
    await store.stop()
    assert [Path(path).name for path in log_fsyncs] == ["db-1.log"]


async def test_a_file_removed_before_any_sync_is_not_synced_afterwards(tmp_path: Path) -> None:
    """Sends and acks nobody waits for fill files no sync has covered yet; once all their
    messages are consumed the checkpoint removes them, and the next synced write syncs
    what is left (it had tried to open a removed file, and the write failed)."""
    store = await open_store(tmp_path, max_file_length=4096, index_delay_s=0)
    sent = [replace(msg(i), body=b"x" * 1000) for i in range(12)]
    for message in sent:
        await store.write([AddMessage(message)], sync=False)
    await store.write([RemoveMessage(Q, m.message_id) for m in sent], sync=False)
    await store.write([AddMessage(msg(99))], sync=False)  # the index catches up, checkpoint
    for _ in range(200):  # polled: the index's timer wakes the writer, which checkpoints
        if not (tmp_path / "db-1.log").exists():
            break
        await asyncio.sleep(0.01)
    assert not (tmp_path / "db-1.log").exists()
    await store.write([AddMessage(msg(100))])
    assert ids(store) == [msg(99).message_id, msg(100).message_id]
    await store.stop()
    store = await open_store(tmp_path, max_file_length=4096)
    assert ids(store) == [msg(99).message_id, msg(100).message_id]
    await store.stop()


async def test_fast_fsyncs_run_in_the_loop_slow_ones_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data files sync in the event loop while fsyncs are fast and groups small, and in
    a worker thread for a big group or once fsyncs average over the limit."""
    import os
    import threading

    from dovecote.store.journal import datafiles
    from dovecote.store.journal.records import encode_batch

    threads: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        threads.append(threading.get_ident())
        real_fsync(fd)

    monkeypatch.setattr(datafiles.os, "fsync", recording_fsync)
    files = datafiles.DataFiles(tmp_path, 1 << 20)
    files.open_for_append()
    files.append(encode_batch([]))
    threads.clear()
    await files.sync(True)
    files.append(b"x" * (datafiles.INLINE_SYNC_MAX_BYTES + 1))  # a big group
    await files.sync(True)
    files.sync_cost_s = 10 * datafiles.INLINE_SYNC_LIMIT_S  # as if the disk were slow
    files.append(encode_batch([]))
    await files.sync(True)
    files.close()
    loop_thread = threading.get_ident()
    assert len(threads) == 3
    assert threads[0] == loop_thread and loop_thread not in threads[1:]


async def test_queues_recover_as_counts_and_are_read_a_page_at_a_time(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    other = parse_destination("queue://other")
    sent = [replace(msg(i), sequence=10 + i, properties={"k": "v"}) for i in range(5)]
    sent[3] = replace(sent[3], priority=7, expiration=123)
    await store.write([AddMessage(m) for m in sent])
    await store.write([AddMessage(replace(msg(9), destination=other, sequence=99))])
    await store.write([RemoveMessage(Q, sent[1].message_id)])
    await store.write([UpdateRedelivery(Q, sent[2].message_id, 2)])
    await store.stop()
    store = await open_store(tmp_path)
    recovered = store.recover_paged()
    kept = [sent[0], sent[2].with_redelivery(2), sent[3], sent[4]]
    assert recovered.queues[Q] == StoredQueue(4, sum(m.size for m in kept), 14)
    assert recovered.queues[other].count == 1
    first = store.read_queue(Q, (0, 0), 2)
    assert first.messages == kept[:2]  # whole, in order, with the redelivery counter
    rest = store.read_queue(Q, first.next, 10)
    assert rest.messages == kept[2:]
    assert store.read_queue(Q, rest.next, 10).messages == []
    # From a message's sequence on (where the broker starts holding a live backlog):
    assert store.read_queue(Q, (13, 0), 10).messages == kept[2:]
    await store.write([RemoveMessage(Q, m.message_id) for m in kept])
    assert Q not in store.recover_paged().queues  # nothing left: no count either
    assert store.message_count(Q) == 0 and store.message_count(other) == 1
    await store.stop()


async def test_queue_counts_kept_in_memory_are_counted_again_after_a_crash(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path)
    sent = [replace(msg(i), sequence=1 + i) for i in range(4)]
    await store.write([AddMessage(m) for m in sent])
    await store.stop()  # a clean close writes the counts
    store = await open_store(tmp_path)
    assert store.recover_paged().queues[Q].count == 4
    late = replace(msg(7), sequence=9)
    await store.write([RemoveMessage(Q, m.message_id) for m in sent[:2]])
    await store.write([AddMessage(late)])
    # A crash: the index's counts are not written again, the journal is not closed.
    await crash(store)
    store = await open_store(tmp_path)
    kept = [*sent[2:], late]
    assert store.recover_paged().queues[Q] == StoredQueue(3, sum(m.size for m in kept), 9)
    assert store.read_queue(Q, (0, 0), 10).messages == kept
    await store.stop()


async def test_an_index_of_an_older_layout_is_rebuilt_from_the_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path)
    sent = [replace(msg(i), sequence=1 + i) for i in range(3)]
    await store.write([AddMessage(m) for m in sent])
    index = store._index
    assert index is not None
    with index.env.begin(write=True) as txn:  # as dovecote 0.1 left it: no order, no counts
        txn.delete(b"version", db=index.meta)
        txn.drop(index.qseq, delete=False)
        txn.drop(index.qstat, delete=False)
    await store.stop()
    with caplog.at_level(logging.WARNING):
        store = await open_store(tmp_path)
    assert "rebuilding" in caplog.text
    assert store.recover_paged().queues[Q].count == 3
    assert store.read_queue(Q, (0, 0), 10).messages == sent
    await store.stop()


async def test_reads_see_groups_the_index_has_not_caught_up_with(tmp_path: Path) -> None:
    # A long delay: the index stays behind the journal until something reads it.
    store = await open_store(tmp_path, index_delay_s=60)
    sent = [replace(msg(i), sequence=1 + i) for i in range(5)]
    await store.write([AddMessage(m) for m in sent])
    await store.write([RemoveMessage(Q, sent[0].message_id)])
    assert store.message_count(Q) == 4
    assert store.read_queue(Q, (0, 0), 10).messages == sent[1:]
    assert store.recover_paged().queues[Q].count == 4
    await store.write([RemoveMessage(Q, sent[1].message_id)])
    assert ids(store) == [m.message_id for m in sent[2:]]
    await store.stop()


async def test_groups_the_index_had_not_caught_up_with_are_replayed_after_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path, index_delay_s=60)
    sent = [replace(msg(i), sequence=1 + i) for i in range(6)]
    await store.write([AddMessage(m) for m in sent[:3]])
    assert store.message_count(Q) == 3  # the index has these
    await store.write([AddMessage(m) for m in sent[3:]])
    await store.write([RemoveMessage(Q, sent[0].message_id)])
    await store.write([RemoveMessage(Q, sent[4].message_id)])
    # A crash: written and fsynced, never applied to the index, the index never closed.
    await crash(store)
    caplog.set_level(logging.INFO)
    store = await open_store(tmp_path)
    assert "replay applied 3 records" in caplog.text
    kept = [sent[1], sent[2], sent[3], sent[5]]
    assert store.recover_paged().queues[Q].count == 4
    assert store.read_queue(Q, (0, 0), 10).messages == kept
    await store.stop()


async def test_the_index_catches_up_on_its_own(tmp_path: Path) -> None:
    store = await open_store(tmp_path, index_delay_s=0.01)
    await store.write([AddMessage(msg(i)) for i in range(3)])
    assert store._index is not None and store._files is not None
    behind = store._index.applied()
    for _ in range(200):  # polled: the timer wakes the writer, which applies the groups
        if store._index.applied() == store._files.head:
            break
        await asyncio.sleep(0.01)
    assert behind != store._files.head
    assert store._index.applied() == store._files.head
    await store.stop()


async def test_a_group_of_large_bodies_is_indexed_at_once_many_small_messages_wait(
    tmp_path: Path,
) -> None:
    """A group of a few large messages (mostly bodies, whatever small removals share it) is
    applied to the index at once; one as large made of many small messages (a transaction's
    commit) waits for the catch-up, so that those consumed before it never reach the
    index."""
    store = await open_store(tmp_path, index_delay_s=60)
    assert store._index is not None and store._files is not None
    await store.write([AddMessage(replace(msg(0), body=b"x" * 100_000))])
    assert store._index.applied() == store._files.head
    await store.write([AddMessage(replace(msg(i), body=b"y" * 1024)) for i in range(1, 101)])
    assert store._index.applied() != store._files.head
    assert store.message_count(Q) == 101  # (a read brings the index up to date first)
    assert store._index.applied() == store._files.head
    # A large message with the small removals (consumers' acks) that share its group.
    big = replace(msg(200), body=b"z" * 100_000)
    await store.write([AddMessage(big)] + [RemoveMessage(Q, msg(i).message_id)
                                            for i in range(1, 51)])  # fmt: skip
    assert store._index.applied() == store._files.head
    assert store.message_count(Q) == 52
    # A group as large of removals alone (a Spark batch's commit) is index work: it waits,
    # and its writer is answered first.
    await store.write([AddMessage(msg(i)) for i in range(1000, 6000)])
    assert store.message_count(Q) == 5052
    await store.write([RemoveMessage(Q, msg(i).message_id) for i in range(1000, 6000)])
    assert store._index.applied() != store._files.head
    assert store.message_count(Q) == 52
    await store.stop()


async def test_consumed_files_are_removed_once_the_index_catches_up(tmp_path: Path) -> None:
    # The checkpoint follows the index, which catches up a moment after the writes on its
    # own (no further write, no read): the journal must not keep what was consumed.
    store = await open_store(tmp_path, max_file_length=300_000)
    sent = [replace(msg(i), body=b"x" * 70_000) for i in range(12)]
    for message in sent:
        await store.write([AddMessage(message)])
    assert len(list(tmp_path.glob("db-*.log"))) >= 3
    await store.write([RemoveMessage(Q, m.message_id) for m in sent])
    files = sorted(tmp_path.glob("db-*.log"))
    for _ in range(200):  # polled: the index's timer, then the checkpoint
        if len(list(tmp_path.glob("db-*.log"))) == 1:
            break
        await asyncio.sleep(0.01)
    assert [p.name for p in tmp_path.glob("db-*.log")] == [files[-1].name]
    assert ids(store) == []
    await store.stop()


def test_small_batches_of_a_group_share_a_record_large_ones_stand_alone() -> None:
    small = [[RemoveMessage(Q, f"m{i}")] for i in range(3)]
    large = [RemoveMessage(Q, f"big{i}") for i in range(SMALL_BATCH_OPS + 1)]
    records = list(group_records([small[0], small[1], large, small[2]]))
    assert records == [small[0] + small[1], large, small[2]]


async def test_concurrent_sync_sends_are_written_as_one_record(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    assert store._files is not None
    start = store._files.head
    await asyncio.gather(*(store.write([AddMessage(msg(i))]) for i in range(8)))
    assert len(list(store._files.scan(start))) == 1
    assert store.message_count(Q) == 8
    await store.stop()
    store = await open_store(tmp_path)
    assert ids(store) == [msg(i).message_id for i in range(8)]
    await store.stop()


def test_batch_encoder_writes_what_encode_batch_writes_and_survives_a_failure(
    tmp_path: Path,
) -> None:
    """The hot path's record (header and a view of the packer's buffer, written with one
    pwritev) is byte for byte the plain encoding, record after record from one reused
    packer; a record left open or failed while packing leaves the packer empty for the next;
    the records read back with their checksums."""
    from dovecote.store.journal import datafiles
    from dovecote.store.journal.records import (
        BatchEncoder,
        SequencedAdd,
        decode_batch,
        encode_batch,
    )

    big = replace(msg(2), body=bytes(range(256)) * 400)
    batches = [
        [SequencedAdd(1, msg(1))],
        [SequencedAdd(2, big), RemoveMessage(Q, msg(1).message_id)],
        [],
        [UpdateRedelivery(Q, big.message_id, 3)],
    ]
    encoder = BatchEncoder()
    unpackable = cast(Any, object())
    files = datafiles.DataFiles(tmp_path, 1 << 20)
    files.open_for_append()
    for ops in batches:
        header, payload = encoder.parts(ops)
        assert header + bytes(payload) == encode_batch(ops)
        files.append(header, payload)
        encoder.release()
        encoder.parts(ops)  # left open (a failure before its release): the next starts anew
        with pytest.raises(TypeError):  # fails while packing
            encoder.parts([*ops, SequencedAdd(9, replace(msg(9), properties={"k": unpackable}))])
    header, payload = encoder.parts(batches[0])
    assert header + bytes(payload) == encode_batch(batches[0])
    encoder.release()
    encoder.release()  # twice is harmless
    files.close()
    read = datafiles.DataFiles(tmp_path, 1 << 20)
    assert [decode_batch(payload) for _, payload in read.scan(None)] == batches


async def test_a_lone_writers_send_is_written_and_fsynced_before_its_write_returns(
    tmp_path: Path, log_fsyncs: list[str]
) -> None:
    """A lone synchronous producer's sends are written in its own turn of the loop (no hop
    to the writer and back): done as the write returns, and never before their fsync."""
    store = await open_store(tmp_path)
    await store.write([AddMessage(msg(0))])  # through the writer: alone since when?
    for _ in range(5):
        await asyncio.sleep(0)
    assert store._files is not None
    for i in range(1, 4):
        store._files.sync_cost_s = 0.0  # a fast disk (this one may be busy)
        synced = len(log_fsyncs)
        write = store.write([AddMessage(msg(i))])
        assert isinstance(write, asyncio.Future) and write.done()
        assert len(log_fsyncs) == synced + 1
        await write
    assert ids(store) == [msg(i).message_id for i in range(4)]
    await store.stop()
    reopened = await open_store(tmp_path)
    assert ids(reopened) == [msg(i).message_id for i in range(4)]
    await reopened.stop()


async def test_slow_fsyncs_go_to_a_thread_and_the_write_waits_for_them(
    tmp_path: Path, log_fsyncs: list[str]
) -> None:
    store = await open_store(tmp_path)
    assert store._files is not None
    for i in range(3):
        store._files.sync_cost_s = 1.0  # a slow disk: the loop must not wait on it
        synced = len(log_fsyncs)
        write = store.write([AddMessage(msg(i))])
        assert not cast(asyncio.Future[None], write).done()
        await write
        assert len(log_fsyncs) == synced + 1
    assert store._files._syncer is not None  # the journal's own thread did them
    await store.stop()
    reopened = await open_store(tmp_path)
    assert ids(reopened) == [msg(i).message_id for i in range(3)]
    await reopened.stop()
