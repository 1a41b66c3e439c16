"""The slave's side of replication (PROTOCOL.md): connect to the master, say where the local
store stands, take a copy if the master says so, then write each record as it comes and ack
it. Run as a task while the role says "slave"; cancelled when the role changes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from dovecote.core.errors import StoreFailedError
from dovecote.store.leveldb.adapter import LevelDBPersistenceAdapter
from dovecote.store.replicated.coordination import Member
from dovecote.store.replicated.history import POSITION, POSITION_KEY, read_position
from dovecote.store.replicated.link import Link, PeerGone
from dovecote.store.replicated.settings import ReplicationSettings, host_port
from dovecote.store.replicated.stream import (
    VERSION,
    Ack,
    Chunk,
    Hello,
    ProtocolError,
    Record,
    Refuse,
    Snapshot,
    SnapshotEnd,
    Welcome,
)

log = logging.getLogger("dovecote.store.replicated")
RETRY_S: Final = 0.5


class Follower:
    def __init__(
        self,
        settings: ReplicationSettings,
        local: LevelDBPersistenceAdapter,
        published: Callable[[int], None],
    ) -> None:
        self.settings = settings
        self.local = local
        self.published = published
        self.master: Member | None = None
        self.connected = False
        self.position, self.epoch = read_position(local.get)
        self.synced = self.position

    async def follow(self, master: Member) -> None:
        """Follow ``master`` until cancelled, connecting again after each failure."""
        self.master = master
        problem = ""
        while True:
            try:
                await self._session(master)
            except (OSError, PeerGone, ProtocolError, StoreFailedError) as exc:
                # One line per change of problem, not one per retry.
                if str(exc) != problem:
                    level = logging.WARNING if isinstance(exc, ProtocolError) else logging.INFO
                    log.log(level, "replication from master %s: %s", master.node_id, exc)
                    problem = str(exc)
            finally:
                self.connected = False
            await asyncio.sleep(RETRY_S)

    async def _session(self, master: Member) -> None:
        host, port = host_port(master.replication_address)
        timeout = self.settings.peer_timeout_s
        async with asyncio.timeout(timeout):  # (not wait_for: see Link.read)
            reader, writer = await asyncio.open_connection(host, port)
        link = Link(reader, writer, timeout)
        try:
            self.position, self.epoch = read_position(self.local.get)
            await link.send(Hello(VERSION, self.settings.node_id, self.epoch, self.position))
            welcome = await link.read()
            if isinstance(welcome, Refuse):
                raise PeerGone(f"refused: {welcome.reason}")
            if not isinstance(welcome, Welcome):
                raise ProtocolError(f"{type(welcome).__name__} before WELCOME")
            link.start_heartbeats()
            self.connected = True
            log.info(
                "following master %s from position %d (%s; it is at %d)",
                welcome.node_id,
                self.position,
                welcome.mode,
                welcome.position,
            )
            if welcome.mode == "snapshot":
                await self._copy(link)
            while True:
                record = await link.read()
                if not isinstance(record, Record):
                    raise ProtocolError(f"{type(record).__name__} where a RECORD was expected")
                self._apply(record)
                await link.send(Ack(self.position, self.synced))
        finally:
            await link.close()

    async def _copy(self, link: Link) -> None:
        begin = await link.read()
        if not isinstance(begin, Snapshot):
            raise ProtocolError(f"{type(begin).__name__} where a SNAPSHOT was expected")
        self.local.empty()  # until the copy ends: position 0, no stream matches it
        self.position = self.epoch = 0
        self.published(0)
        while not isinstance(part := await link.read(), SnapshotEnd):
            if not isinstance(part, Chunk):
                raise ProtocolError(f"{type(part).__name__} inside a copy")
            self.local.apply(dict(part.items), sync=False)
        end = POSITION.pack(begin.position, begin.epoch)
        self.local.apply({POSITION_KEY: end}, sync=self.settings.disk_syncs)
        self.position, self.epoch = begin.position, begin.epoch
        self.synced = self.position
        log.info("copy from the master received, at position %d", self.position)
        await link.send(Ack(self.position, self.synced))
        self.published(self.position)

    def _apply(self, record: Record) -> None:
        if record.position != self.position + 1:
            raise ProtocolError(f"record {record.position} after {self.position}")
        sync = record.disk and self.settings.disk_syncs
        self.local.apply(dict(record.changes), sync=sync)
        self.position, self.epoch = record.position, record.epoch
        if sync or not self.settings.disk_syncs:  # (without syncs, written is all there is)
            self.synced = self.position
        self.published(self.position)
