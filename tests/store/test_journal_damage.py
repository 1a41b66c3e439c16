"""Damaged journal files cost only the damage (FORMAT.md: Torn tails and damaged records):
flipped bytes in an older data file, a rebuild over a damaged record, damage in the middle
of the last file, a truncated index, and index commits or fsyncs that fail (a full disk).
Real files; failures are injected only where a real disk cannot be made to fail on cue."""

from __future__ import annotations

import logging
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import lmdb
import pytest
from contract import Q, T, msg, sub
from journal_crash import crash

from dovecote.core.destinations import parse_destination
from dovecote.core.message import Message
from dovecote.store.api import AckSubscription, AddMessage, AddSubscription, RemoveMessage
from dovecote.store.journal import JournalPersistenceAdapter

FILE_LENGTH = 8192
COUNT = 60
OTHER = parse_destination("queue://other")


async def open_store(directory: Path) -> JournalPersistenceAdapter:
    adapter = JournalPersistenceAdapter(directory, max_file_length=FILE_LENGTH)
    await adapter.start()
    return adapter


def sent(i: int) -> Message:
    return replace(msg(i), sequence=i + 1, body=b"m%03d-" % i + b"x" * 400)


async def fill(directory: Path) -> list[Message]:
    """COUNT messages, one record each, over several data files."""
    store = await open_store(directory)
    messages = [sent(i) for i in range(COUNT)]
    for message in messages:
        await store.write([AddMessage(message)])
    await store.stop()
    assert len(list(directory.glob("db-*.log"))) >= 4
    return messages


def flip_middle(path: Path, count: int = 16) -> int:
    """Flip ``count`` bytes inside a message body in the middle of a data file (one
    record's); returns where."""
    data = bytearray(path.read_bytes())
    at = data.index(b"x" * 64, len(data) // 2)
    for k in range(count):
        data[at + k] ^= 0xFF
    path.write_bytes(bytes(data))
    return at


def read_all(store: JournalPersistenceAdapter) -> tuple[list[Message], int]:
    """Page a queue through as the broker does; returns the messages and how many lost."""
    messages: list[Message] = []
    lost = 0
    position = (0, 0)
    while True:
        page = store.read_queue(Q, position, 7)
        messages += page.messages
        lost += getattr(page, "lost", 0)  # (a store before damage was reported: none)
        if not page.messages:
            return messages, lost
        position = page.next


def ids(messages: list[Message]) -> list[str]:
    return [m.message_id for m in messages]


async def test_flipped_bytes_in_an_older_file_lose_that_record_not_the_queue(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    messages = await fill(tmp_path)
    flip_middle(tmp_path / "db-2.log")
    caplog.set_level(logging.WARNING)
    store = await open_store(tmp_path)  # the index already covers db-2: nothing replayed
    assert store.recover_paged().queues[Q].count == COUNT
    got, lost = read_all(store)  # used to raise OSError: the broker dropped the connection
    assert lost == 1
    assert len(got) == COUNT - 1
    assert set(ids(got)) < set(ids(messages))
    assert "db-2.log" in caplog.text and "1 messages lost (1 of queue://orders)" in caplog.text
    await store.stop()
    store = await open_store(tmp_path)  # dropped from the index: counted right from now on
    assert store.recover_paged().queues[Q].count == COUNT - 1
    assert read_all(store) == (got, 0)
    await store.stop()


async def test_a_damaged_record_in_a_record_of_several_queues_costs_only_its_messages(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path)
    await store.write([AddMessage(sent(i)) for i in range(3)])
    shared = [AddMessage(sent(3)), AddMessage(replace(sent(4), destination=OTHER))]
    await store.write(shared)
    await store.write([AddMessage(sent(5))])
    await store.stop()
    data = bytearray((tmp_path / "db-1.log").read_bytes())
    at = data.index(b"m003-")
    data[at : at + 4] = b"XXXX"
    (tmp_path / "db-1.log").write_bytes(bytes(data))
    caplog.set_level(logging.WARNING)
    store = await open_store(tmp_path)
    recovered = store.recover()  # the whole-state path (durable subscriptions use it)
    assert ids(recovered.queues[Q]) == ids([sent(i) for i in (0, 1, 2, 5)])
    assert OTHER not in recovered.queues  # its one message shared the damaged record
    assert "2 messages lost" in caplog.text
    assert store.message_count(Q) == 4 and store.message_count(OTHER) == 0
    await store.stop()


async def test_a_damaged_topic_message_costs_only_it_for_each_durable_subscription(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(tmp_path)
    await store.write([AddSubscription(sub("a")), AddSubscription(sub("b"))])
    for i in range(3):
        await store.write([AddMessage(replace(sent(i), destination=T))])
    await store.write([AckSubscription(T, "c1", "a", sent(0).message_id)])
    await store.stop()
    data = bytearray((tmp_path / "db-1.log").read_bytes())
    at = data.index(b"m001-")
    data[at : at + 4] = b"XXXX"
    (tmp_path / "db-1.log").write_bytes(bytes(data))
    caplog.set_level(logging.WARNING)
    store = await open_store(tmp_path)
    pending = {r.subscription.name: ids(r.pending) for r in store.recover_paged().subscriptions}
    assert pending == {"a": [sent(2).message_id], "b": [sent(0).message_id, sent(2).message_id]}
    assert "1 messages lost (1 of topic://prices)" in caplog.text
    await store.stop()
    caplog.clear()
    store = await open_store(tmp_path)  # gone from both subscriptions' pending lists
    pending = {r.subscription.name: ids(r.pending) for r in store.recover_paged().subscriptions}
    assert pending == {"a": [sent(2).message_id], "b": [sent(0).message_id, sent(2).message_id]}
    assert "lost" not in caplog.text
    await store.stop()


async def test_a_deleted_data_file_costs_the_messages_in_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await fill(tmp_path)
    (tmp_path / "db-2.log").unlink()
    caplog.set_level(logging.WARNING)
    store = await open_store(tmp_path)
    got, lost = read_all(store)
    assert lost > 0 and len(got) + lost == COUNT
    assert [r.getMessage() for r in caplog.records] == [
        f"journal db-2.log cannot be read (missing): {lost} messages lost "
        f"({lost} of queue://orders), removed from the store"
    ]
    await store.stop()
    store = await open_store(tmp_path)
    assert store.recover_paged().queues[Q].count == len(got)
    await store.stop()
    # The same through the whole-state path, one line for the file.
    shutil.copy(tmp_path / "db-3.log", tmp_path / "db-3.copy")
    (tmp_path / "db-3.log").unlink()
    caplog.clear()
    store = await open_store(tmp_path)
    left = ids(store.recover().queues[Q])
    assert len(left) < len(got)
    assert len(caplog.records) == 1 and "journal db-3.log cannot be read" in caplog.text
    await store.stop()


async def test_a_rebuild_after_a_damaged_record_keeps_the_rest_of_its_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    messages = await fill(tmp_path)
    flip_middle(tmp_path / "db-2.log")
    for path in (tmp_path / "index").iterdir():
        path.unlink()
    caplog.set_level(logging.INFO)
    store = await open_store(tmp_path)
    recovered = ids(store.recover().queues[Q])
    # Only the damaged record's message is gone (the rest of db-2.log used to go with it).
    assert len(recovered) == COUNT - 1
    assert recovered == [m for m in ids(messages) if m in recovered]
    line = next(r.getMessage() for r in caplog.records if "db-2.log bytes" in r.getMessage())
    assert "lost: 1 messages (1 of queue://orders)" in line, line
    await store.stop()


async def test_a_rebuild_does_not_count_a_damaged_message_that_was_consumed_as_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    messages = await fill(tmp_path)
    # The index waits: no catch-up, so no checkpoint removes the consumed files.
    store = JournalPersistenceAdapter(tmp_path, max_file_length=FILE_LENGTH, index_delay_s=60)
    await store.start()
    await store.write([RemoveMessage(Q, m.message_id) for m in messages])
    await crash(store)  # the files stay (a clean stop would remove them)
    flip_middle(tmp_path / "db-2.log")
    for path in (tmp_path / "index").iterdir():
        path.unlink()
    caplog.set_level(logging.INFO)
    store = await open_store(tmp_path)
    assert Q not in store.recover().queues
    assert "lost: 0 messages" in caplog.text
    await store.stop()


async def test_damage_amid_the_last_file_is_skipped_not_truncated_away(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = JournalPersistenceAdapter(tmp_path)  # one big file: every record in the last
    await store.start()
    for i in range(20):
        await store.write([AddMessage(sent(i))])
    await store.stop()
    log_file = tmp_path / "db-1.log"
    data = bytearray(log_file.read_bytes())
    at = data.index(b"m007-")
    data[at : at + 4] = b"XXXX"
    log_file.write_bytes(bytes(data))
    for path in (tmp_path / "index").iterdir():
        path.unlink()
    caplog.set_level(logging.WARNING)
    store = JournalPersistenceAdapter(tmp_path)
    await store.start()
    expected = [m.message_id for m in (sent(i) for i in range(20)) if m != sent(7)]
    # Before: a torn tail, truncated there: the 12 good records after it were lost for good.
    assert ids(store.recover().queues[Q]) == expected
    assert "skipped to the next good record" in caplog.text
    await store.write([AddMessage(sent(99))])  # appended after the last good record
    await store.stop()
    for path in (tmp_path / "index").iterdir():
        path.unlink()
    store = JournalPersistenceAdapter(tmp_path)
    await store.start()
    assert ids(store.recover().queues[Q]) == [*expected, sent(99).message_id]
    await store.stop()


def _start_in_child(directory: Path) -> subprocess.CompletedProcess[str]:
    """Open the store in another process: a SIGBUS there fails this test, not pytest."""
    code = (
        "import asyncio, sys, logging\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from pathlib import Path\n"
        "from dovecote.store.journal import JournalPersistenceAdapter\n"
        "from dovecote.core.destinations import parse_destination\n"
        "async def main():\n"
        "    s = JournalPersistenceAdapter(Path(sys.argv[1]), max_file_length=8192)\n"
        "    await s.start()\n"
        "    print(s.recover_paged().queues[parse_destination('queue://orders')].count)\n"
        "    await s.stop()\n"
        "asyncio.run(main())\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("keep", [0.5, 0.1, 0.0])
async def test_a_truncated_index_is_rebuilt_not_mapped(tmp_path: Path, keep: float) -> None:
    await fill(tmp_path)
    index_file = tmp_path / "index" / "data.mdb"
    with index_file.open("r+b") as f:
        f.truncate(int(index_file.stat().st_size * keep))
    done = _start_in_child(tmp_path)
    assert done.returncode == 0, (done.returncode, done.stderr)  # -7 was SIGBUS
    assert done.stdout.split() == [str(COUNT)]
    assert "rebuilding it from the journal" in done.stderr


async def test_an_index_that_is_no_lmdb_file_or_missing_is_rebuilt_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await fill(tmp_path)
    index_file = tmp_path / "index" / "data.mdb"
    index_file.write_bytes(b"\x01" * 70000)
    done = _start_in_child(tmp_path)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.split() == [str(COUNT)]
    index_file.unlink()
    caplog.set_level(logging.INFO)
    store = await open_store(tmp_path)
    assert "index" in caplog.text and "missing" in caplog.text
    assert store.recover_paged().queues[Q].count == COUNT
    await store.stop()


_READ_ALL_IN_CHILD = """
import asyncio, logging, sys
from pathlib import Path
from dovecote.store.journal import JournalPersistenceAdapter
from dovecote.core.destinations import parse_destination
logging.basicConfig(level=logging.WARNING)
async def main():
    s = JournalPersistenceAdapter(Path(sys.argv[1]), max_file_length=8192)
    await s.start()
    count, position = 0, (0, 0)
    while (page := s.read_queue(parse_destination("queue://orders"), position, 7)).messages:
        count, position = count + len(page.messages), page.next
    print(count)
    await s.stop()
asyncio.run(main())
"""


def garble_message_pages(index_file: Path, how: str) -> None:
    """Garble the leaf pages of the index's message entries (msgpack arrays naming the
    queue): their node offsets point past the page ("offsets", as a torn write of the page
    can leave them: in an index this small, past the file's end, a SIGBUS), or the page's
    bounds ("bounds": LMDB reports MDB_CORRUPTED). Stale copies of the pages are garbled
    too, which does not matter; every live one is."""
    data = bytearray(index_file.read_bytes())
    page_size, garbled = 4096, 0
    for start in range(2 * page_size, len(data), page_size):
        page = data[start : start + page_size]
        flags, lower = struct.unpack_from("<HH", page, 10)
        if flags & 0x02 and b"\x9a\xaequeue://orders" in page and b"m0" not in page:
            if how == "offsets":
                for at in range(16, lower, 2):
                    struct.pack_into("<H", data, start + at, 0xFFF0)
            else:
                struct.pack_into("<HH", data, start + 12, 0xFFF0, 0xFFFF)
            garbled += 1
    assert garbled
    index_file.write_bytes(bytes(data))


def read_all_in_child(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _READ_ALL_IN_CHILD, str(directory)],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


async def test_an_index_page_a_crash_left_garbled_is_found_before_the_broker_maps_it(
    tmp_path: Path,
) -> None:
    await fill(tmp_path)
    (tmp_path / "index" / "closed-cleanly").unlink(missing_ok=True)  # as a crash leaves it
    garble_message_pages(tmp_path / "index" / "data.mdb", "offsets")
    done = read_all_in_child(tmp_path)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # was -7: SIGBUS
    assert done.stdout.split() == [str(COUNT)]
    assert "rebuilding it from the journal" in done.stderr


async def test_index_damage_met_while_serving_rebuilds_the_index_not_fails_the_read(
    tmp_path: Path,
) -> None:
    await fill(tmp_path)
    # A clean close (no walk at the next start): the damage is met when a queue is read.
    garble_message_pages(tmp_path / "index" / "data.mdb", "bounds")
    done = read_all_in_child(tmp_path)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # was MDB_BAD_TXN
    assert done.stdout.split() == [str(COUNT)]
    # (Met at open or at the first read, as the pages fall: rebuilt either way.)
    assert "is damaged" in done.stderr and "rebuilding it" in done.stderr


class _FailingTxn:
    """A write transaction whose commit fails as LMDB's does on a full disk."""

    def __init__(self, txn: Any, env: _FailingEnv) -> None:
        self._txn = txn
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)

    def commit(self) -> None:
        if self._env.failures > 0:
            self._env.failures -= 1
            self._txn.abort()
            raise lmdb.DiskError("mdb_txn_commit: No space left on device")
        self._txn.commit()

    def __enter__(self) -> _FailingTxn:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is None:
            self.commit()
        else:
            self._txn.abort()


class _FailingEnv:
    def __init__(self, env: Any) -> None:
        self._env = env
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def begin(self, write: bool = False, **kw: Any) -> Any:
        txn = self._env.begin(write=write, **kw)
        return _FailingTxn(txn, self) if write else txn


async def test_queue_counts_stay_exact_across_failed_index_commits(tmp_path: Path) -> None:
    store = JournalPersistenceAdapter(tmp_path, index_delay_s=60)
    await store.start()
    assert store._index is not None
    env = _FailingEnv(store._index.env)
    store._index.env = env  # type: ignore[assignment]
    await store.write([AddMessage(sent(i)) for i in range(10)])
    env.failures = 5
    for _ in range(5):  # each read tries to bring the index up to date, and fails
        with pytest.raises(Exception, match="No space left"):
            store.message_count(Q)
    # Counted once, though applied six times (it used to say 60, and kept saying it).
    assert store.message_count(Q) == 10
    await store.write([RemoveMessage(Q, sent(i).message_id) for i in range(4)])
    env.failures = 2
    for _ in range(2):
        with pytest.raises(Exception, match="No space left"):
            store.message_count(Q)
    assert store.message_count(Q) == 6
    store._index.env = env._env
    await store.stop()
    store = JournalPersistenceAdapter(tmp_path)
    await store.start()
    assert store.recover_paged().queues[Q].count == 6
    got, _ = read_all(store)
    assert ids(got) == ids([sent(i) for i in range(4, 10)])
    await store.stop()


async def test_counts_an_older_dovecote_inflated_on_a_full_disk_are_counted_again(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path)
    await store.write([AddMessage(sent(i)) for i in range(5)])
    await store.stop()
    env = lmdb.open(str(tmp_path / "index"), max_dbs=10)
    meta, qstat = env.open_db(b"meta"), env.open_db(b"qstat")
    with env.begin(write=True) as txn:  # as the previous dovecote left it: 60 for 5
        applied = txn.get(b"applied", db=meta)
        assert applied is not None
        for key in (b"exact_totals_at", b"totals_at"):
            txn.delete(key, db=meta)
        txn.put(b"totals_at", applied, db=meta)
        txn.put(b"queue://orders", struct.pack(">QQ", 60, 60 * sent(0).size), db=qstat)
    env.close()
    for _ in range(2):
        store = await open_store(tmp_path)
        assert store.recover_paged().queues[Q].count == 5  # it said 60, and kept saying it
        await store.stop()


async def test_a_send_refused_for_a_failed_fsync_does_not_come_back_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await open_store(tmp_path)
    await store.write([AddMessage(sent(0))])

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", full)
        with pytest.raises(Exception, match="No space left"):
            await store.write([AddMessage(sent(1))])
    await store.write([AddMessage(sent(2))])
    assert ids(read_all(store)[0]) == ids([sent(0), sent(2)])
    await store.stop()
    for path in (tmp_path / "index").iterdir():
        path.unlink()
    store = await open_store(tmp_path)  # a rebuild reads only what the journal kept
    assert ids(store.recover().queues[Q]) == ids([sent(0), sent(2)])
    await store.stop()
