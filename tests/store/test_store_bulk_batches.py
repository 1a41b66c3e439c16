"""A transaction of many sends, as a Spark partition's Append requests commit it (issue 32),
is one store batch: the journal keeps it as one record, so after a restart it is there
whole, and a record torn by a crash mid-write (kill -9 during the commit) leaves none of
it, never a part."""

from __future__ import annotations

from pathlib import Path

from contract import Q, msg

from dovecote.store.api import AddMessage
from dovecote.store.journal import JournalPersistenceAdapter

COUNT = 20_000


async def open_store(directory: Path) -> JournalPersistenceAdapter:
    adapter = JournalPersistenceAdapter(directory)
    await adapter.start()
    return adapter


def ids(adapter: JournalPersistenceAdapter) -> list[str]:
    return [m.message_id for m in adapter.recover().queues.get(Q, [])]


async def test_a_large_batch_is_recovered_whole_in_order(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    await store.write([AddMessage(msg(i)) for i in range(COUNT)])
    await store.stop()
    store = await open_store(tmp_path)
    assert ids(store) == [msg(i).message_id for i in range(COUNT)]
    await store.stop()


async def test_a_large_batch_torn_mid_write_leaves_none_of_it(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    await store.write([AddMessage(msg(-1))])  # before: stays
    log_file = tmp_path / "db-1.log"
    await store.stop()
    before = log_file.stat().st_size
    store = await open_store(tmp_path)
    await store.write([AddMessage(msg(i)) for i in range(COUNT)])
    await store.stop()
    after = log_file.stat().st_size
    with log_file.open("r+b") as f:
        f.truncate(before + (after - before) // 2)  # the crash came halfway through
    for path in (tmp_path / "index").iterdir():
        path.unlink()  # nothing of the torn batch may come back from the index either
    store = await open_store(tmp_path)
    assert ids(store) == [msg(-1).message_id]
    await store.stop()
