"""The master's side of replication (PROTOCOL.md): the server slaves connect to, the record
of each group the local store writes, the backlog slaves catch up from, and the wait for a
quorum's acks before a write is done.

It is the local LevelDB store's GroupObserver: ``prepare`` adds the group's position (and
refuses the group without a quorum), ``written`` ships it and waits as ``sync`` says.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from dovecote.core.errors import StoreFailedError
from dovecote.store.leveldb.adapter import Changes, LevelDBPersistenceAdapter
from dovecote.store.replicated.history import (
    HISTORY_KEY,
    POSITION,
    POSITION_KEY,
    History,
    can_stream,
    pack_history,
    read_history,
    read_position,
)
from dovecote.store.replicated.link import Link, PeerGone, cancel
from dovecote.store.replicated.settings import DISK, ReplicationSettings, SyncPolicy
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
    encode,
)

log = logging.getLogger("dovecote.store.replicated")
CHUNK_BYTES: Final = 1 << 20


def new_epoch() -> int:
    return int.from_bytes(os.urandom(8), "big") or 1


@dataclass(slots=True)
class SlaveSession:
    """One connected slave, as the master sees it."""

    node_id: str
    address: str
    link: Link
    next: int
    """The next position to send it."""
    applied: int = 0
    synced: int = 0
    catching_up: bool = True


@dataclass(slots=True)
class QuorumWait:
    position: int
    disk: bool
    done: asyncio.Future[None]


class ReplicationServer:
    def __init__(
        self,
        settings: ReplicationSettings,
        policy: SyncPolicy,
        local: LevelDBPersistenceAdapter,
        needed: int,
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.local = local
        self.needed = needed
        """Slaves that must be connected (and ack, for a remote sync): a quorum less one."""
        self.master = False
        self.refusing: str | None = "not master"
        self.position, self.epoch = read_position(local.get)
        self.history: History = read_history(local.get)
        self._history_written = True
        self._backlog: deque[tuple[int, bytes]] = deque()
        self._backlog_bytes = 0
        self.sessions: dict[int, SlaveSession] = {}
        self._waits: list[QuorumWait] = []
        self._new_record = asyncio.Event()
        self._changed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._serving: set[asyncio.Task[None]] = set()
        """The tasks of the connections (asyncio.start_server's), to wait for at close."""
        self.published: Callable[[int], None] | None = None
        """Told each new position (the store publishes it to the coordinator)."""

    # -- the server ------------------------------------------------------------------------

    async def listen(self, host: str, port: int) -> int:
        """Bind; the port bound (port 0: any free one)."""
        self._server = await asyncio.start_server(self._serve, host, port)
        bound: int = self._server.sockets[0].getsockname()[1]
        return bound

    def become_master(self) -> None:
        """Start answering slaves, as a master of a new epoch from the local store's last
        group on."""
        self.position, _ = read_position(self.local.get)
        self.history = read_history(self.local.get)
        self._backlog.clear()
        self._backlog_bytes = 0
        self.epoch = new_epoch()
        self.history.append((self.epoch, self.position + 1))
        self._history_written = False
        self.master = True
        self.refusing = None
        self.local.observer = self

    def refuse(self, reason: str) -> None:
        """No longer master: every write fails, the slaves are let go."""
        self.refusing = reason
        self.master = False  # (it stays the store's observer: groups still queued fail)
        self._fail_waits(reason)
        for session in list(self.sessions.values()):
            session.link.abort()  # (its _serve task ends on that, and closes the rest)

    async def close(self) -> None:
        """Stop serving; a master first gives its slaves up to the peer timeout to ack its
        last group, so that a clean stop hands over all it wrote."""
        if self._server is not None:
            self._server.close()
            self._server = None
        if self.master:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.peer_timeout_s):
                    await self._caught_up()
        self.refuse("the store stopped")
        if self._serving:  # (their connections are aborted: they end at once)
            await asyncio.wait(set(self._serving), timeout=self.settings.peer_timeout_s)

    async def _caught_up(self) -> None:
        while any(s.applied < self.position for s in self.sessions.values()):
            await self._change()

    async def attached(self) -> None:
        """Until a quorum's slaves are connected (the group can take writes)."""
        while self.connected < self.needed:
            await self._change()

    async def _change(self) -> None:
        """Until a slave connects, acks or goes."""
        changed = self._changed = asyncio.Event()
        await changed.wait()

    @property
    def connected(self) -> int:
        return len(self.sessions)

    def quorum_error(self) -> str | None:
        """Why writes fail now, or None."""
        if self.refusing is not None:
            return self.refusing
        if self.connected < self.needed:
            return f"no quorum: {self.connected + 1} of {self.settings.replicas} replicas"
        return None

    # -- GroupObserver: each group the local store writes ---------------------------------

    def prepare(self, changes: Changes) -> None:
        reason = self.quorum_error()
        if reason is not None:
            raise StoreFailedError(reason)
        changes[POSITION_KEY] = POSITION.pack(self.position + 1, self.epoch)
        if not self._history_written:
            changes[HISTORY_KEY] = pack_history(self.history)

    async def written(self, changes: Changes, wanted: bool) -> None:
        self.position += 1
        self._history_written = True
        disk = wanted and self.policy.remote >= DISK
        frame = encode(Record(self.position, self.epoch, disk, list(changes.items())))
        self._backlog.append((self.position, frame))
        self._backlog_bytes += len(frame)
        while self._backlog_bytes > self.settings.backlog_bytes and len(self._backlog) > 1:
            self._backlog_bytes -= len(self._backlog.popleft()[1])
        self._new_record.set()
        self._new_record = asyncio.Event()
        if self.published is not None:
            self.published(self.position)
        # Every group waits for the quorum, also one nobody waits for (it then needs only
        # the slaves' "applied"), before the next is written: a master is never more than
        # one group ahead of a quorum, so the highest position elected holds every
        # acknowledged group (PROTOCOL.md).
        if not self.policy.remote or not self.needed:
            return
        reason = self.quorum_error()  # (lost while the group was written in a thread)
        if reason is not None:
            raise StoreFailedError(reason)
        wait = QuorumWait(self.position, disk, asyncio.get_running_loop().create_future())
        self._waits.append(wait)
        self._settle()
        await wait.done

    def _settle(self) -> None:
        """Answer the waits a quorum has acked."""
        for wait in list(self._waits):
            acks = sum(
                1
                for s in self.sessions.values()
                if (s.synced if wait.disk else s.applied) >= wait.position
            )
            if acks >= self.needed:
                self._waits.remove(wait)
                if not wait.done.done():
                    wait.done.set_result(None)

    def _fail_waits(self, reason: str) -> None:
        waits, self._waits = self._waits, []
        for wait in waits:
            if not wait.done.done():
                wait.done.set_exception(StoreFailedError(reason))

    # -- one slave -------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        serving = asyncio.current_task()
        assert serving is not None
        self._serving.add(serving)
        serving.add_done_callback(self._serving.discard)
        link = Link(reader, writer, self.settings.peer_timeout_s)
        session: SlaveSession | None = None
        try:
            hello = await link.read()
            if not isinstance(hello, Hello):
                raise ProtocolError(f"{type(hello).__name__} before HELLO")
            if hello.version != VERSION:
                await link.send(Refuse(f"this master speaks version {VERSION}"))
                return
            if not self.master:
                await link.send(Refuse(f"{self.settings.node_id} is not master"))
                return
            link.start_heartbeats()
            session = await self._welcome(link, hello)
            log.info(
                "slave %s connected from %s at position %d",
                hello.node_id,
                link.peer,
                hello.position,
            )
            sender = asyncio.create_task(self._send(session))
            try:
                await self._read_acks(session, sender)
            finally:
                await cancel(sender)
        except (PeerGone, ProtocolError, StoreFailedError, OSError) as exc:
            who = session.node_id if session is not None else link.peer
            level = logging.WARNING if isinstance(exc, ProtocolError) else logging.INFO
            log.log(level, "slave %s dropped: %s", who, exc)
        finally:
            reason = self.quorum_error() if self.sessions.pop(id(link), None) else None
            self._changed.set()  # (one less to wait for)
            if reason is not None:
                self._fail_waits(reason)
            await link.close()

    async def _welcome(self, link: Link, hello: Hello) -> SlaveSession:
        stream = can_stream(self.history, self.position, hello.epoch, hello.position)
        first = self._backlog[0][0] if self._backlog else self.position + 1
        stream = stream and hello.position + 1 >= first
        mode = "stream" if stream else "snapshot"
        await link.send(Welcome(VERSION, self.settings.node_id, self.epoch, self.position, mode))
        session = SlaveSession(hello.node_id, link.peer, link, hello.position + 1)
        session.applied = session.synced = hello.position if stream else 0
        session.catching_up = session.applied < self.position
        self.sessions[id(link)] = session  # it counts towards the quorum from now on
        self._changed.set()
        if not stream:
            session.next = await self._copy(link)
        return session

    async def _copy(self, link: Link) -> int:
        """Send the whole store as one LevelDB snapshot reads it; the next position to send."""
        snapshot = self.local.snapshot()
        try:
            position, epoch = read_position(snapshot.get)
            await link.send(Snapshot(position, epoch))
            items: list[tuple[bytes, bytes]] = []
            size = 0
            for key, value in snapshot.iterator():
                if key == POSITION_KEY:
                    continue
                items.append((key, value))
                size += len(key) + len(value)
                if size >= CHUNK_BYTES:
                    await link.send(Chunk(items))
                    items, size = [], 0
            await link.send(Chunk(items))
            await link.send(SnapshotEnd(position))
        finally:
            snapshot.close()
        return position + 1

    async def _send(self, session: SlaveSession) -> None:
        """The records from the session's next position on, as they come."""
        while True:
            event = self._new_record
            while session.next <= self.position:
                first = self._backlog[0][0] if self._backlog else self.position + 1
                if session.next < first:
                    raise PeerGone(f"it fell behind the backlog (needs {session.next})")
                await session.link.send_frame(self._backlog[session.next - first][1])
                session.next += 1
            await event.wait()

    async def _read_acks(self, session: SlaveSession, sender: asyncio.Task[None]) -> None:
        while True:
            reading = asyncio.ensure_future(session.link.read())
            done, _ = await asyncio.wait({reading, sender}, return_when=asyncio.FIRST_COMPLETED)
            if sender in done:
                reading.cancel()
                sender.result()  # raises what ended it
                return
            ack = reading.result()
            if not isinstance(ack, Ack):
                raise ProtocolError(f"{type(ack).__name__} where an ACK was expected")
            session.applied, session.synced = ack.applied, ack.synced
            self._changed.set()
            if session.catching_up and ack.applied >= self.position:
                session.catching_up = False
                log.info("slave %s caught up at position %d", session.node_id, ack.applied)
            self._settle()
