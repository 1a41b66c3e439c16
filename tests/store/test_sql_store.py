"""The SQL adapter against the store contract on SQLite and on a real PostgreSQL server,
then its own cases: the tables ActiveMQ's JDBC store has, and the lock row."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from contract import Q, StoreContract, msg
from sqlalchemy import create_engine, inspect, text

from dovecote.store.api import AddMessage, PersistenceAdapter, RemoveMessage
from dovecote.store.sql import SqlPersistenceAdapter
from dovecote.store.sql.journaled import JournaledSqlPersistenceAdapter

sys.path.insert(0, str(Path(__file__).parent.parent))
from postgres import postgres_server


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'dovecote.db'}"
        return
    base: str = request.getfixturevalue("pg_url")
    # A database per test keeps the contract's cases apart on the shared server.
    name = f"t{abs(hash(request.node.nodeid)) % 10**9}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    yield base.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
async def store(url: str) -> AsyncIterator[PersistenceAdapter]:
    adapter = SqlPersistenceAdapter(url)
    await adapter.start()
    yield adapter
    await adapter.stop()


@pytest.fixture
def reopen(url: str):  # type: ignore[no-untyped-def]
    async def again(adapter: PersistenceAdapter) -> PersistenceAdapter:
        await adapter.stop()
        fresh = SqlPersistenceAdapter(url)
        await fresh.start()
        return fresh

    return again


class TestSqlStore(StoreContract):
    pass


async def test_the_tables_are_activemqs(url: str, store: PersistenceAdapter) -> None:
    await store.write([AddMessage(msg(1))])
    engine = create_engine(url)
    names = {n.upper() for n in inspect(engine).get_table_names()}
    assert {"ACTIVEMQ_MSGS", "ACTIVEMQ_ACKS", "ACTIVEMQ_LOCK"} <= names
    with engine.connect() as conn:
        rows = conn.execute(text('SELECT "CONTAINER", "MSGID_PROD" FROM "ACTIVEMQ_MSGS"')).all()
    engine.dispose()
    assert rows == [(str(Q), msg(1).message_id)]


async def test_second_broker_waits_for_the_lock_row(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    master = SqlPersistenceAdapter(url, lease_ms=600)
    await master.start()
    await master.write([AddMessage(msg(1))])
    slave = SqlPersistenceAdapter(url, lease_ms=600)
    starting = asyncio.create_task(slave.start())
    while "waiting as a slave" not in caplog.text:
        await asyncio.sleep(0.05)
    assert not starting.done()
    await master.stop()  # releases the lease
    await asyncio.wait_for(starting, 10)
    assert [m.message_id for m in slave.recover().queues[Q]] == [msg(1).message_id]
    await slave.stop()


@pytest.fixture
def journaled_dir(tmp_path: Path) -> Path:
    return tmp_path / "journal"


class TestJournaledSqlStore(StoreContract):
    @pytest.fixture
    async def store(self, url: str, journaled_dir: Path) -> AsyncIterator[PersistenceAdapter]:
        adapter = journaled(url, journaled_dir)
        await adapter.start()
        yield adapter
        await adapter.stop()

    @pytest.fixture
    def reopen(self, url: str, journaled_dir: Path):  # type: ignore[no-untyped-def]
        async def again(adapter: PersistenceAdapter) -> PersistenceAdapter:
            await adapter.stop()
            fresh = journaled(url, journaled_dir)
            await fresh.start()
            return fresh

        return again


def journaled(url: str, directory: Path, **options: object) -> JournaledSqlPersistenceAdapter:
    return JournaledSqlPersistenceAdapter(directory, SqlPersistenceAdapter(url), **options)  # type: ignore[arg-type]


def count_rows(url: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text('SELECT COUNT(*) FROM "ACTIVEMQ_MSGS"')).scalar()
    engine.dispose()
    return int(rows or 0)


async def test_messages_consumed_before_a_checkpoint_never_reach_sql(
    url: str, journaled_dir: Path
) -> None:
    store = journaled(url, journaled_dir, checkpoint_interval_ms=0)
    await store.start()
    for i in range(100):
        await store.write([AddMessage(msg(i))])
    for i in range(90):
        await store.write([RemoveMessage(Q, msg(i).message_id)])
    assert count_rows(url) == 0  # nothing checkpointed yet: all of it is in the journal
    await store.stop()  # a clean stop checkpoints
    assert count_rows(url) == 10
    assert store.folded_away == 180  # 90 adds and their 90 removes never reached SQL


async def test_the_journal_tail_survives_a_crash_before_the_checkpoint(
    url: str, journaled_dir: Path
) -> None:
    store = journaled(url, journaled_dir, checkpoint_interval_ms=0)
    await store.start()
    for i in range(5):
        await store.write([AddMessage(msg(i))])
    # Simulate kill -9: no checkpoint, no clean stop; the journal files are all there is.
    await store._writer.stop()
    assert store._files is not None
    store._files.close()
    await store.sql.stop()
    assert count_rows(url) == 0
    again = journaled(url, journaled_dir, checkpoint_interval_ms=0)
    await again.start()
    assert [m.message_id for m in again.recover().queues[Q]] == [
        msg(i).message_id for i in range(5)
    ]
    assert count_rows(url) == 5
    await again.stop()


async def test_periodic_checkpoint_writes_in_batches(url: str, journaled_dir: Path) -> None:
    store = journaled(url, journaled_dir, checkpoint_interval_ms=100)
    await store.start()
    before = store.checkpoints
    await store.write([AddMessage(msg(i)) for i in range(20)])
    while store.checkpoints == before or count_rows(url) < 20:
        await asyncio.sleep(0.02)
    assert count_rows(url) == 20
    await store.stop()
