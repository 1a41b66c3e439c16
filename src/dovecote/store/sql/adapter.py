"""The SQL store (compatibility M3), the design of ActiveMQ's JDBC store over SQLAlchemy Core:
SQLite by default (a file under the data directory), PostgreSQL as the server.

Every database call runs on one worker thread, so the event loop never blocks and SQLite's
connection stays on one thread. Writes go through the group writer: the batches queued at
one moment become one database transaction. One broker at a time holds the store: it takes
the ACTIVEMQ_LOCK row by lease (ActiveMQ's lease database locker) and renews it; a second
broker waits, logging that it is a slave, until the lease is released or runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError, OperationalError

from dovecote.core.destinations import Destination, destination_matches, parse_destination
from dovecote.core.errors import StoreFailedError
from dovecote.store.api import (
    AckSubscription,
    AddSubscription,
    DurableSubscription,
    RecoveredState,
    RecoveredSubscription,
    RemoveDestination,
    RemoveMessage,
    RemoveSubscription,
    StoreOp,
    UpdateRedelivery,
)
from dovecote.store.groupcommit import GroupWriter, written
from dovecote.store.journal.records import JournalOp, SequencedAdd, adds_to_store, sequence
from dovecote.store.messagecodec import pack_message, unpack_message
from dovecote.store.sql.schema import acks, checkpoint, lock, messages, metadata, sub_acks

log = logging.getLogger("dovecote.store.sql")
R = TypeVar("R")

LOCK_ROW = 1
PROBE_ID = -1
"""The messages row the degraded mode's probe writes and removes in one transaction."""
PROBE_BYTES = 64 * 1024
"""What the probe writes: room for a send of that size, not just for the smallest change."""
_SubKey = tuple[str, str]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _is_queue(container: str) -> bool:
    return container.startswith(("queue://", "temp-queue://"))


class SqlPersistenceAdapter:
    def __init__(
        self,
        url: str,
        create_tables: bool = True,
        lease_ms: int = 10_000,
    ) -> None:
        self.url = url
        self.create_tables = create_tables
        self.lease_ms = lease_ms
        self._me = f"{socket.gethostname()}-{os.getpid()}-{os.urandom(4).hex()}"
        self._engine: Engine | None = None
        self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dovecote-sql")
        self._writer = GroupWriter(self._write_group, adds=adds_to_store)
        self._writer.probe = self._probe
        self._renewer: asyncio.Task[None] | None = None
        self._subs: dict[_SubKey, tuple[DurableSubscription, int]] = {}
        self._next_seq = 1

    # -- lifecycle -------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., R], *args: Any) -> R:
        return await asyncio.get_running_loop().run_in_executor(self._db, fn, *args)

    async def start(self) -> None:
        self._engine = await self._run(self._open)
        waiting = False
        while not await self._run(self._try_lock):
            if not waiting:
                log.info(
                    "SQL store %s is locked by another broker; waiting as a slave", self._safe_url
                )
                waiting = True
            await asyncio.sleep(self.lease_ms / 4000)
        if waiting:
            log.info("SQL store lock acquired; this broker is now the master")
        await self._run(self._load)
        self._renewer = asyncio.create_task(self._renew_forever())
        self._writer.start()

    @property
    def _safe_url(self) -> str:
        return self.url.split("@")[-1]

    def _open(self) -> Engine:
        engine = create_engine(self.url, pool_pre_ping=True)
        if engine.dialect.name == "sqlite":

            @event.listens_for(engine, "connect")
            def _pragmas(dbapi_connection: Any, _: Any) -> None:
                cursor = dbapi_connection.cursor()
                # WAL for concurrent readers; FULL so a commit survives power loss too.
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=FULL")
                cursor.execute("PRAGMA busy_timeout=5000")
                cursor.close()

        if self.create_tables:
            metadata.create_all(engine)
        return engine

    def _try_lock(self) -> bool:
        assert self._engine is not None
        now = _now_ms()
        with self._engine.begin() as conn:
            row = conn.execute(select(lock).where(lock.c.ID == LOCK_ROW)).first()
            if row is None:
                try:
                    conn.execute(insert(lock).values(ID=LOCK_ROW, TIME=now, BROKER_NAME=self._me))
                except IntegrityError:
                    return False
                return True
            if row.BROKER_NAME != self._me and row.TIME + self.lease_ms > now:
                return False
            taken = conn.execute(
                update(lock)
                .where(lock.c.ID == LOCK_ROW, lock.c.TIME == row.TIME)
                .values(TIME=now, BROKER_NAME=self._me)
            )
            return taken.rowcount == 1

    def _renew(self) -> bool:
        assert self._engine is not None
        with self._engine.begin() as conn:
            renewed = conn.execute(
                update(lock)
                .where(lock.c.ID == LOCK_ROW, lock.c.BROKER_NAME == self._me)
                .values(TIME=_now_ms())
            )
            return renewed.rowcount == 1

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                renewed = await self._run(self._renew)
            except OperationalError as exc:
                # The database is down or full: sends say so (degraded mode); renewing goes
                # on, as the lease must once the database is back.
                log.debug("SQL store lease not renewed: %s", exc.orig)
                continue
            if not renewed:
                log.error("SQL store lease lost to another broker")

    def _release(self) -> None:
        assert self._engine is not None
        with self._engine.begin() as conn:
            conn.execute(
                update(lock)
                .where(lock.c.ID == LOCK_ROW, lock.c.BROKER_NAME == self._me)
                .values(TIME=0)
            )

    async def stop(self) -> None:
        await self._writer.stop()
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        if self._engine is not None:
            await self._run(self._release)
            await self._run(self._engine.dispose)
            self._engine = None

    def _load(self) -> None:
        assert self._engine is not None
        with self._engine.connect() as conn:
            top = conn.execute(select(func.max(messages.c.ID))).scalar()
            self._next_seq = (top or 0) + 1
            self._subs = {}
            for row in conn.execute(select(acks)):
                sub = DurableSubscription(
                    row.CLIENT_ID, row.SUB_NAME, parse_destination(row.CONTAINER),
                    row.SELECTOR, bool(row.NO_LOCAL),
                )  # fmt: skip
                self._subs[(row.CLIENT_ID, row.SUB_NAME)] = (sub, row.LAST_ACKED_ID)

    # -- writing ---------------------------------------------------------------------------

    @property
    def degraded(self) -> str | None:
        """Why the store is in degraded mode (store/health.py), or None. While it is, a
        probe tries a write every few seconds (``_probe``): the mode ends with no send."""
        return self._writer.degraded

    async def _probe(self) -> None:
        """Whether the database takes a send's write again (room on its disk, the server
        back): a row of ``PROBE_BYTES`` written and removed in one committed transaction."""
        try:
            await self._run(self._probe_write)
        except OperationalError as exc:
            raise StoreFailedError(f"the store could not write: {exc.orig}") from exc

    def _probe_write(self) -> None:
        assert self._engine is not None
        with self._engine.begin() as conn:
            conn.execute(
                insert(messages).values(
                    ID=PROBE_ID, CONTAINER="dovecote://probe", MSGID_PROD="probe", MSGID_SEQ=0,
                    EXPIRATION=0, MSG=bytes(PROBE_BYTES), PRIORITY=0, REDELIVERY=0,
                )
            )  # fmt: skip
            conn.execute(delete(messages).where(messages.c.ID == PROBE_ID))

    def write(
        self, batch: Sequence[StoreOp], sync: bool = True, lazy: bool = False
    ) -> Awaitable[None]:
        if not batch:
            return written()
        ops, self._next_seq = sequence(batch, self._next_seq)
        return self._writer.submit(ops, urgent=not lazy)

    async def _write_group(self, group: list[list[JournalOp]]) -> None:
        try:
            await self._run(self._apply_group, group)
        except OperationalError as exc:  # the database's failure (full, gone): not ours
            raise StoreFailedError(f"the store could not write: {exc.orig}") from exc

    def _apply_group(self, group: list[list[JournalOp]]) -> None:
        assert self._engine is not None
        with self._engine.begin() as conn:
            for ops in group:
                for op in ops:
                    self._apply(conn, op)

    def _apply(self, conn: Connection, op: JournalOp) -> None:
        match op:
            case SequencedAdd(seq, message):
                container = str(message.destination)
                if message.destination.is_topic and not self._subscribers(container, seq):
                    return  # no durable subscription needs it
                conn.execute(
                    insert(messages).values(
                        ID=seq,
                        CONTAINER=container,
                        MSGID_PROD=message.message_id,
                        MSGID_SEQ=0,
                        EXPIRATION=message.expiration,
                        MSG=pack_message(message),
                        PRIORITY=message.priority,
                        REDELIVERY=message.redelivery_counter,
                    )
                )
            case RemoveMessage(destination, message_id):
                conn.execute(delete(messages).where(*self._by_id(destination, message_id)))
            case UpdateRedelivery(destination, message_id, counter):
                conn.execute(
                    update(messages)
                    .where(*self._by_id(destination, message_id))
                    .values(REDELIVERY=counter)
                )
            case AddSubscription(sub):
                key = (sub.client_id, sub.name)
                start = conn.execute(select(func.max(messages.c.ID))).scalar() or 0
                conn.execute(
                    delete(acks).where(acks.c.CLIENT_ID == key[0], acks.c.SUB_NAME == key[1])
                )
                conn.execute(
                    insert(acks).values(
                        CONTAINER=str(sub.destination),
                        SUB_DEST=str(sub.destination),
                        CLIENT_ID=sub.client_id,
                        SUB_NAME=sub.name,
                        SELECTOR=sub.selector,
                        LAST_ACKED_ID=start,
                        PRIORITY=5,
                        NO_LOCAL=sub.no_local,
                    )
                )
                self._subs[key] = (sub, start)
            case RemoveSubscription(_, client_id, name):
                conn.execute(
                    delete(acks).where(acks.c.CLIENT_ID == client_id, acks.c.SUB_NAME == name)
                )
                conn.execute(
                    delete(sub_acks).where(
                        sub_acks.c.CLIENT_ID == client_id, sub_acks.c.SUB_NAME == name
                    )
                )
                self._subs.pop((client_id, name), None)
                self._drop_unneeded_topic_messages(conn)
            case AckSubscription(_, client_id, name, message_id):
                row = conn.execute(
                    select(messages.c.ID, messages.c.CONTAINER).where(
                        messages.c.MSGID_PROD == message_id,
                        ~messages.c.CONTAINER.startswith("queue://"),
                        ~messages.c.CONTAINER.startswith("temp-queue://"),
                    )
                ).first()
                if row is None:
                    return
                conn.execute(
                    insert(sub_acks).values(CLIENT_ID=client_id, SUB_NAME=name, MSG_ID=row.ID)
                )
                self._drop_if_all_acked(conn, row.ID, row.CONTAINER)
            case RemoveDestination(destination):
                conn.execute(delete(messages).where(messages.c.CONTAINER == str(destination)))

    @staticmethod
    def _by_id(destination: Destination, message_id: str) -> tuple[Any, ...]:
        return (messages.c.CONTAINER == str(destination), messages.c.MSGID_PROD == message_id)

    def _subscribers(self, container: str, seq: int) -> list[_SubKey]:
        """The durable subscriptions that need the topic message ``seq`` of ``container``."""
        destination = parse_destination(container)
        return [
            key
            for key, (sub, start) in self._subs.items()
            if seq > start and destination_matches(sub.destination, destination)
        ]

    def _drop_if_all_acked(self, conn: Connection, seq: int, container: str) -> None:
        needed = set(self._subscribers(container, seq))
        acked = {
            (r.CLIENT_ID, r.SUB_NAME)
            for r in conn.execute(select(sub_acks).where(sub_acks.c.MSG_ID == seq))
        }
        if needed <= acked:
            conn.execute(delete(messages).where(messages.c.ID == seq))
            conn.execute(delete(sub_acks).where(sub_acks.c.MSG_ID == seq))

    def _drop_unneeded_topic_messages(self, conn: Connection) -> None:
        rows = conn.execute(
            select(messages.c.ID, messages.c.CONTAINER).where(
                ~messages.c.CONTAINER.startswith("queue://"),
                ~messages.c.CONTAINER.startswith("temp-queue://"),
            )
        ).all()
        for row in rows:
            self._drop_if_all_acked(conn, row.ID, row.CONTAINER)

    # -- for the journaled SQL store --------------------------------------------------------

    async def apply_checkpoint(self, ops: list[JournalOp], position: tuple[int, int]) -> None:
        """Apply already-sequenced operations and record the journal position they reach,
        in one transaction: a crash leaves either both or neither."""
        await self._run(self._apply_checkpoint, ops, position)

    def _apply_checkpoint(self, ops: list[JournalOp], position: tuple[int, int]) -> None:
        assert self._engine is not None
        with self._engine.begin() as conn:
            for op in ops:
                self._apply(conn, op)
            conn.execute(delete(checkpoint))
            conn.execute(
                insert(checkpoint).values(ID=1, FILE_ID=position[0], FILE_OFFSET=position[1])
            )

    def checkpoint_position(self) -> tuple[int, int] | None:
        assert self._engine is not None
        with self._engine.connect() as conn:
            row = conn.execute(select(checkpoint)).first()
        return None if row is None else (int(row.FILE_ID), int(row.FILE_OFFSET))

    @property
    def next_seq(self) -> int:
        return self._next_seq

    # -- reading ---------------------------------------------------------------------------

    def recover(self) -> RecoveredState:
        assert self._engine is not None
        state = RecoveredState()
        with self._engine.connect() as conn:
            topic_rows = []
            for row in conn.execute(select(messages).order_by(messages.c.ID)):
                if _is_queue(row.CONTAINER):
                    message = unpack_message(row.MSG).with_redelivery(row.REDELIVERY)
                    state.queues.setdefault(message.destination, []).append(message)
                else:
                    topic_rows.append(row)
            for (client_id, name), (sub, start) in self._subs.items():
                acked = set(
                    conn.execute(
                        select(sub_acks.c.MSG_ID).where(
                            sub_acks.c.CLIENT_ID == client_id, sub_acks.c.SUB_NAME == name
                        )
                    ).scalars()
                )
                pending = [
                    unpack_message(row.MSG).with_redelivery(row.REDELIVERY)
                    for row in topic_rows
                    if row.ID > start
                    and row.ID not in acked
                    and destination_matches(sub.destination, parse_destination(row.CONTAINER))
                ]
                state.subscriptions.append(RecoveredSubscription(sub, pending))
        return state

    def message_count(self, destination: Destination) -> int:
        assert self._engine is not None
        with self._engine.connect() as conn:
            count = conn.execute(
                select(func.count())
                .select_from(messages)
                .where(messages.c.CONTAINER == str(destination))
            ).scalar()
        return int(count or 0)

    def checkpoint(self) -> None:
        return None
