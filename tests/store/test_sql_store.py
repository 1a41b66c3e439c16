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

from dovecote.store.api import AddMessage, PersistenceAdapter
from dovecote.store.sql import SqlPersistenceAdapter

sys.path.insert(0, str(Path(__file__).parent.parent))
from postgres import postgres_server  # noqa: E402


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
