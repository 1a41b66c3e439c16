"""The replicated LevelDB store (issue 35): a local LevelDB store whose master streams every
group it writes to its slaves (PROTOCOL.md), with a Coordinator (coordination.py) saying who
is master.

``start`` returns once this broker is elected master (until then it follows the master as a
slave, or waits); a write is done when ``sync`` says; a broker that stops being master
refuses every write from then on and calls ``on_demoted`` (the app restarts it as a slave).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from dovecote.core.destinations import Destination
from dovecote.core.errors import StoreFailedError
from dovecote.store.api import PagedRecovery, QueuePage, QueuePosition, RecoveredState, StoreOp
from dovecote.store.leveldb.adapter import LevelDBPersistenceAdapter
from dovecote.store.replicated.coordination import Coordinator, Member, Role, quorum_of
from dovecote.store.replicated.history import read_position
from dovecote.store.replicated.link import cancel
from dovecote.store.replicated.master import ReplicationServer
from dovecote.store.replicated.settings import DISK, ReplicationSettings, host_port, parse_sync
from dovecote.store.replicated.slave import Follower

log = logging.getLogger("dovecote.store.replicated")


@dataclass(frozen=True)
class ReplicaStatus:
    node_id: str
    address: str
    position: int
    connected: bool
    lag: int
    """Positions behind this broker's (as master), or behind the master (as slave)."""


@dataclass(frozen=True)
class ReplicationStatus:
    role: str
    """master, slave, waiting, starting, or demoted."""
    node_id: str
    address: str
    position: int
    master: str | None
    replicas: tuple[ReplicaStatus, ...]
    degraded: str | None


class ReplicatedLevelDBStore:
    def __init__(
        self,
        settings: ReplicationSettings,
        coordinator: Coordinator,
        on_demoted: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.policy = parse_sync(settings.sync)
        self.coordinator = coordinator
        self.on_demoted = on_demoted
        self.local = LevelDBPersistenceAdapter(
            settings.directory, disk_syncs=settings.disk_syncs and self.policy.local >= DISK
        )
        self.needed = quorum_of(settings.replicas) - 1
        self.role = "starting"
        self.reason = ""
        """Why it waits (role "waiting"), or why it was demoted."""
        self.master: Member | None = None
        self.replication_address = ""
        self._server: ReplicationServer | None = None
        self._follower: Follower | None = None
        self._following: asyncio.Task[None] | None = None
        self._watching: asyncio.Task[None] | None = None
        self._attaching: asyncio.Task[None] | None = None
        self._elected: asyncio.Future[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        await self.local.start()
        try:
            host, port = host_port(self.settings.bind)
            self._server = ReplicationServer(self.settings, self.policy, self.local, self.needed)
            self._server.published = self._publish
            bound = await self._server.listen(host, port)
            self.replication_address = f"{self.settings.hostname or host}:{bound}"
            self._follower = Follower(self.settings, self.local, self._publish)
            self._elected = asyncio.get_running_loop().create_future()
            position = read_position(self.local.get)[0]
            await self.coordinator.start(
                Member(self.settings.node_id, self.replication_address, position)
            )
            self._watching = asyncio.create_task(
                self._watch(), name=f"{self.settings.node_id}-roles"
            )
            await self._elected
        except BaseException:
            await self._shut()
            raise

    async def stop(self) -> None:
        await self._shut()

    async def _shut(self) -> None:
        for task in (self._watching, self._following, self._attaching):
            await cancel(task)
        self._watching = self._following = self._attaching = None
        await self.local.stop()  # (a master's last groups still get their acks)
        if self._server is not None:
            await self._server.close()
        with contextlib.suppress(Exception):
            await self.coordinator.stop()
        if self.role == "master":
            self.role, self.reason = "stopped", "the store stopped"

    @property
    def server(self) -> ReplicationServer | None:
        return self._server

    def _publish(self, position: int) -> None:
        self.coordinator.publish_position(position)

    # -- roles -----------------------------------------------------------------------------

    async def _watch(self) -> None:
        try:
            async for role in self.coordinator.roles():
                await self._take(role)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error("the replication coordinator failed: %s", exc)
            self._demote(f"the coordinator failed: {exc}")
            if self._elected is not None and not self._elected.done():
                self._elected.set_exception(StoreFailedError(f"the coordinator failed: {exc}"))

    async def _take(self, role: Role) -> None:
        serving = self._elected is not None and self._elected.done()
        if self.role == "master" and not serving and role.kind != "master":
            # Elected, but start() has not returned (no quorum of slaves attached yet): no
            # write was taken, so it simply follows its new role.
            await cancel(self._attaching)
            assert self._server is not None
            self._server.refuse("no longer master")
            log.info("no longer master before a quorum of slaves attached")
        elif self.role in ("master", "demoted"):
            if role.kind != "master" and self.role == "master":
                why = role.reason or f"{role.master.node_id if role.master else '?'} is master"
                self._demote(why)
            return
        if role.kind == "slave" and role.master is not None:
            same = self.master is not None and (
                (self.master.node_id, self.master.replication_address)
                == (role.master.node_id, role.master.replication_address)
            )
            if self._following is not None and same:
                return  # (the same master, its position published anew)
            await self._stop_following()
            self.role, self.master, self.reason = "slave", role.master, ""
            assert self._follower is not None
            log.info("slave of %s (%s)", role.master.node_id, role.master.replication_address)
            self._following = asyncio.create_task(self._follower.follow(role.master))
            return
        await self._stop_following()
        self.master = None
        if role.kind == "waiting":
            self.role, self.reason = "waiting", role.reason
            log.info("waiting for a master to be elected: %s", role.reason or "no reason given")
            return
        assert self._server is not None
        self.local.reload()
        self._server.become_master()
        self.role, self.reason = "master", ""
        log.info(
            "elected master at position %d (a quorum is %d of %d replicas)",
            self._server.position,
            self.needed + 1,
            self.settings.replicas,
        )
        self._publish(self._server.position)
        self._attaching = asyncio.create_task(self._serve_once_attached())

    async def _serve_once_attached(self) -> None:
        """start() returns (the broker opens its transports) once a quorum of slaves is
        attached: before that every write would fail for want of a quorum."""
        assert self._server is not None
        if self._server.connected < self.needed:
            log.info("waiting for %d slave(s) to attach", self.needed - self._server.connected)
            await self._server.attached()
        if self._elected is not None and not self._elected.done():
            self._elected.set_result(None)

    async def _stop_following(self) -> None:
        await cancel(self._following)
        self._following = None

    def _demote(self, why: str) -> None:
        was_master = self.role == "master"
        self.role, self.reason = "demoted", f"no longer master: {why}"
        if self._server is not None:
            self._server.refuse(self.reason)
        if was_master:
            log.warning("store %s", self.reason)
            if self.on_demoted is not None:
                self.on_demoted(why)

    # -- writing ---------------------------------------------------------------------------

    def _refusal(self) -> str | None:
        if self.role != "master" or self._server is None:
            return self.reason or f"this broker is not the master ({self.role})"
        return self._server.quorum_error()

    def write(
        self, batch: Sequence[StoreOp], sync: bool = True, lazy: bool = False
    ) -> Awaitable[None]:
        reason = self._refusal() if batch else None
        if reason is not None:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(StoreFailedError(reason))
            return failed
        return self.local.write(batch, sync, lazy)

    @property
    def degraded(self) -> str | None:
        return self._refusal() or self.local.degraded

    def checkpoint(self) -> None:
        self.local.checkpoint()

    # -- reading: the local store's ----------------------------------------------------------

    def recover(self) -> RecoveredState:
        return self.local.recover()

    def recover_paged(self) -> PagedRecovery:
        return self.local.recover_paged()

    def read_queue(self, destination: Destination, start: QueuePosition, limit: int) -> QueuePage:
        return self.local.read_queue(destination, start, limit)

    def message_count(self, destination: Destination) -> int:
        return self.local.message_count(destination)

    def stored_message_ids(self) -> list[str]:
        """A key-for-key copy of the master's: what a promoted slave rebuilds its duplicate
        check from (store/producers.py)."""
        return self.local.stored_message_ids()

    # -- for the admin API -------------------------------------------------------------------

    @property
    def position(self) -> int:
        if self.role == "master" and self._server is not None:
            return self._server.position
        return self._follower.position if self._follower is not None else 0

    def replication_status(self) -> ReplicationStatus:
        position = self.position
        sessions = (
            {} if self._server is None else {s.node_id: s for s in self._server.sessions.values()}
        )
        replicas = []
        for member in self.coordinator.members():
            if member.node_id == self.settings.node_id:
                continue
            if self.role == "master":
                session = sessions.get(member.node_id)
                at = session.applied if session is not None else member.position
                replicas.append(
                    ReplicaStatus(
                        member.node_id,
                        member.replication_address,
                        at,
                        session is not None,
                        max(position - at, 0),
                    )
                )
            else:
                is_master = self.master is not None and member.node_id == self.master.node_id
                connected = is_master and self._follower is not None and self._follower.connected
                lag = max(member.position - position, 0) if is_master else 0
                replicas.append(
                    ReplicaStatus(
                        member.node_id, member.replication_address, member.position, connected, lag
                    )
                )
        return ReplicationStatus(
            self.role,
            self.settings.node_id,
            self.replication_address,
            position,
            self.settings.node_id
            if self.role == "master"
            else (self.master.node_id if self.master is not None else None),
            tuple(replicas),
            self.degraded,
        )
