"""The Coordinator on ZooKeeper (issue 35), through kazoo: each broker of a group registers an
ephemeral sequential znode ``member-NNNNNNNNNN`` under ``zk_path``, its data a JSON object
(node id, replication address, position, master flag), and every member applies the
election rule of coordination.py to what it reads there.

The election is decided on a consistent view, so that the newest store wins:
- while no master is registered, every member publishes its position again after each
  change of membership (a master gone, a member come), and a member claims only when every
  member's data was written after the parent's last child change (``mzxid >= pzxid``);
- the claim is one ZooKeeper transaction that checks every other member's data version and
  sets the claimant's master flag: two claims on the same view cannot both succeed.
A master stays master until its znode goes with its session. Whenever the connection is
suspended (the session may expire unseen, and another member take over) or the session is
lost, the role is "waiting" at once; a lost session registers again once connected.

kazoo calls back from its own threads: every callback only hands over to the event loop
(``call_soon_threadsafe``), and kazoo's asynchronous results become asyncio futures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any, Final

from kazoo.client import KazooClient, KazooState  # type: ignore[import-untyped]
from kazoo.exceptions import (  # type: ignore[import-untyped]
    ConnectionLoss,
    KazooException,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

from dovecote.store.replicated.coordination import Member, Role, quorum_of

log = logging.getLogger("dovecote.store.replicated")

MEMBER_PREFIX: Final = "member-"
PUBLISH_INTERVAL_S: Final = 0.5
"""Positions go to ZooKeeper at most this often while a master runs (every member's data
watch fires on each write); at once when an election needs them."""
RETRY_AFTER_ERROR_S: Final = 0.5

# kazoo logs each failed connection attempt; this coordinator says what matters (lost,
# back) in one line each, so kazoo's own lines are kept for errors.
_kazoo_log = logging.getLogger("dovecote.store.replicated.kazoo")
if _kazoo_log.level == logging.NOTSET:
    _kazoo_log.setLevel(logging.ERROR)


@dataclass(frozen=True)
class ZooKeeperSettings:
    address: str
    """kazoo's hosts: "host:port[,host:port...]" (an ensemble), a chroot after a slash."""
    path: str
    """The group's znode; its children are the members."""
    session_timeout_s: float
    replicas: int


@dataclass(frozen=True)
class _Registration:
    name: str  # the znode's name, member-NNNNNNNNNN (the sequence orders registrations)
    member: Member
    version: int
    mzxid: int


def _encode(member: Member) -> bytes:
    return json.dumps({
        "node_id": member.node_id, "address": member.replication_address,
        "position": member.position, "master": member.master,
    }).encode()  # fmt: skip


def _decode(data: bytes) -> Member:
    fields = json.loads(data)
    return Member(
        str(fields["node_id"]), str(fields["address"]), int(fields["position"]),
        bool(fields.get("master", False)),
    )  # fmt: skip


def _future(loop: asyncio.AbstractEventLoop, result: Any) -> asyncio.Future[Any]:
    """kazoo's IAsyncResult as an asyncio future of this loop."""
    future: asyncio.Future[Any] = loop.create_future()

    def settle(done: Any) -> None:
        if future.done():
            return
        if done.successful():
            future.set_result(done.value)
        else:
            future.set_exception(done.exception)

    def completed(done: Any) -> None:  # in a kazoo thread
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(settle, done)

    result.rawlink(completed)
    return future


class ZooKeeperCoordinator:
    """A member of a group whose master ZooKeeper elects (coordination.Coordinator)."""

    def __init__(self, settings: ZooKeeperSettings) -> None:
        self.settings = settings
        self.quorum = quorum_of(settings.replicas)
        self._path = "/" + settings.path.strip("/")
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._me: Member | None = None
        self._name: str | None = None  # our znode while registered
        self._master = False  # our znode says master (our claim succeeded)
        self._connected = False
        self._view: list[_Registration] = []
        self._role = Role("waiting", reason="not started")
        self._listeners: list[asyncio.Queue[Role | None]] = []
        self._poked = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()  # our znode's data is written by one writer at a time
        self._publisher: asyncio.TimerHandle | None = None
        self._published_at = 0.0

    # -- the Coordinator protocol ----------------------------------------------------------

    async def start(self, me: Member) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._me = replace(me, master=False)
        self._client = KazooClient(
            hosts=self.settings.address,
            timeout=self.settings.session_timeout_s,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            logger=_kazoo_log,
        )
        self._client.add_listener(self._state_changed)
        self._emit(Role("waiting", reason=f"no ZooKeeper session yet ({self.settings.address})"))
        self._task = loop.create_task(self._follow())
        self._client.start_async()  # connects (and reconnects) in kazoo's threads

    async def roles(self) -> AsyncIterator[Role]:
        queue: asyncio.Queue[Role | None] = asyncio.Queue()
        queue.put_nowait(self._role)
        self._listeners.append(queue)
        try:
            while (role := await queue.get()) is not None:
                yield role
        finally:
            self._listeners.remove(queue)

    def publish_position(self, position: int) -> None:
        assert self._me is not None and self._loop is not None, "start() first"
        if position == self._me.position:
            return
        self._me = replace(self._me, position=position)
        if self._publisher is None:
            wait = max(0.0, self._published_at + PUBLISH_INTERVAL_S - time.monotonic())
            self._publisher = self._loop.call_later(wait, self._publish_later)

    def members(self) -> list[Member]:
        return [r.member for r in self._view]

    @property
    def role(self) -> Role:
        return self._role

    async def stop(self) -> None:
        if self._publisher is not None:
            self._publisher.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        client, self._client = self._client, None
        if client is not None:
            # Closing the session removes our ephemeral znode at once (no session timeout).
            client.remove_listener(self._state_changed)
            await asyncio.to_thread(client.stop)
            await asyncio.to_thread(client.close)
        self._name = None
        self._connected = False
        self._emit(Role("waiting", reason="stopped"))
        for queue in self._listeners:
            queue.put_nowait(None)

    # -- from kazoo's threads --------------------------------------------------------------

    def _state_changed(self, state: str) -> None:
        self._call(self._on_state, state)

    def _watch(self, event: Any) -> None:
        self._call(self._poke)

    def _call(self, callback: Any, *args: Any) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: the broker has stopped
            loop.call_soon_threadsafe(callback, *args)

    # -- in the event loop -----------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        if self._client is None:
            return
        if state == KazooState.CONNECTED:
            self._connected = True
            log.info("ZooKeeper session at %s", self.settings.address)
            self._poke()
            return
        self._connected = False
        if state == KazooState.LOST:
            self._name, self._master = None, False
            reason = "ZooKeeper session expired: registering again once connected"
        else:
            reason = "ZooKeeper connection lost: no role until it is back"
        log.warning("%s (%s)", reason, self.settings.address)
        self._emit(Role("waiting", reason=reason))

    def _poke(self) -> None:
        self._poked.set()

    def _emit(self, role: Role) -> None:
        if _same(role, self._role):
            return
        self._role = role
        log.debug("replication role: %s", _describe(role))  # the store logs what it does
        for queue in self._listeners:
            queue.put_nowait(role)

    async def _follow(self) -> None:
        while True:
            await self._poked.wait()
            self._poked.clear()
            if not self._connected:
                continue
            try:
                await self._refresh()
            except (ConnectionLoss, SessionExpiredError):
                continue  # the state listener says what follows
            except NoNodeError:
                self._poke()  # a znode went between two reads: read again
            except KazooException as exc:
                log.warning("ZooKeeper: %s: reading the group again", type(exc).__name__)
                await asyncio.sleep(RETRY_AFTER_ERROR_S)
                self._poke()

    async def _refresh(self) -> None:
        assert self._loop is not None and self._me is not None
        if self._name is None:
            await self._register()
        children, parent = await _future(
            self._loop, self._client.get_children_async(self._path, self._watch, True)
        )
        view = await self._read([c for c in children if c.startswith(MEMBER_PREFIX)])
        self._view = view
        mine = next((r for r in view if r.name == self._name), None)
        if mine is None:  # our znode was removed under us: register again
            self._name, self._master = None, False
            self._poke()
            return
        masters = [r for r in view if r.member.master]
        if masters:
            master = masters[0].member
            self._emit(Role("master") if masters[0] is mine else Role("slave", master=master))
            return
        if len(view) < self.quorum:
            self._emit(Role("waiting", reason=(
                f"no quorum: {len(view)} of {self.settings.replicas} replicas registered, "
                f"a master needs {self.quorum}"
            )))  # fmt: skip
            return
        await self._elect(view, mine, parent.pzxid)

    async def _register(self) -> None:
        assert self._loop is not None and self._me is not None
        loop, client = self._loop, self._client
        await _future(loop, client.ensure_path_async(self._path))
        async with self._writing:
            self._master = False
            if orphans := await self._own_znodes():
                # A create whose answer the connection lost may have been done: this
                # session's znode is ours, not a second member.
                self._name = orphans[0]
                await self._publish_unlocked()
                log.info("registered in %s as %s (%s)", self._path, self._name, self._me.node_id)
                return
            created = await _future(
                loop,
                client.create_async(
                    f"{self._path}/{MEMBER_PREFIX}", _encode(self._me),
                    ephemeral=True, sequence=True,
                ),
            )  # fmt: skip
            self._published_at = time.monotonic()
        self._name = created.rsplit("/", 1)[1]
        log.info("registered in %s as %s (%s)", self._path, self._name, self._me.node_id)

    async def _own_znodes(self) -> list[str]:
        """Members' znodes this session owns (after a lost answer to a create)."""
        assert self._loop is not None
        session_id = self._client.client_id[0] if self._client.client_id else None
        names = await _future(self._loop, self._client.get_children_async(self._path))
        stats = await asyncio.gather(*(
            _future(self._loop, self._client.exists_async(f"{self._path}/{name}"))
            for name in names if name.startswith(MEMBER_PREFIX)
        ))  # fmt: skip
        members = [n for n in names if n.startswith(MEMBER_PREFIX)]
        return sorted(
            name for name, stat in zip(members, stats, strict=True)
            if stat is not None and stat.ephemeralOwner == session_id
        )  # fmt: skip

    async def _read(self, names: list[str]) -> list[_Registration]:
        assert self._loop is not None
        reads = [
            _future(self._loop, self._client.get_async(f"{self._path}/{name}", self._watch))
            for name in names
        ]
        view = []
        for name, result in zip(
            names, await asyncio.gather(*reads, return_exceptions=True), strict=True
        ):
            if isinstance(result, NoNodeError):
                continue  # gone since the listing; the children watch fires for it
            if isinstance(result, BaseException):
                raise result
            data, stat = result
            try:
                member = _decode(data)
            except (ValueError, KeyError, TypeError):
                log.debug("znode %s/%s is not a member's: ignored", self._path, name)
                continue
            view.append(_Registration(name, member, stat.version, stat.mzxid))
        view.sort(key=lambda r: r.name)  # registration order
        return view

    async def _elect(self, view: list[_Registration], mine: _Registration, pzxid: int) -> None:
        """No master: elect one once every member's position is current."""
        if mine.mzxid < pzxid:
            await self._publish()  # the watch brings us back with it published
            return
        behind = [r.member.node_id for r in view if r.mzxid < pzxid]
        if behind:
            self._emit(Role("waiting", reason=f"electing: waiting for {', '.join(behind)}"))
            return
        winner = max(view, key=lambda r: (r.member.position, -int(r.name[len(MEMBER_PREFIX) :])))
        if winner is not mine:
            self._emit(Role("waiting", reason=f"electing: {winner.member.node_id} is newest"))
            return
        await self._claim(view, mine)

    async def _claim(self, view: list[_Registration], mine: _Registration) -> None:
        assert self._loop is not None and self._me is not None
        async with self._writing:
            claim = self._client.transaction()
            for other in view:
                if other is not mine:
                    claim.check(f"{self._path}/{other.name}", other.version)
            claimed = replace(mine.member, master=True)
            claim.set_data(f"{self._path}/{mine.name}", _encode(claimed), mine.version)
            results = await _future(self._loop, claim.commit_async())
            if any(isinstance(r, Exception) for r in results):
                self._poke()  # the view changed under us: look again
                return
            self._master = True
            self._me = replace(self._me, position=claimed.position)
            self._published_at = time.monotonic()
        log.info("elected master of %s at position %d", self._path, claimed.position)

    def _publish_later(self) -> None:
        self._publisher = None
        assert self._loop is not None
        self._loop.create_task(self._publish_quietly())

    async def _publish_quietly(self) -> None:
        try:
            await self._publish()
        except KazooException as exc:  # the state listener handles a lost connection
            log.debug("position not published: %s", type(exc).__name__)

    async def _publish(self) -> None:
        """Write our data (position, master flag) now."""
        assert self._loop is not None and self._me is not None
        if not self._connected or self._name is None:
            return
        async with self._writing:
            await self._publish_unlocked()

    async def _publish_unlocked(self) -> None:
        assert self._loop is not None and self._me is not None
        if self._name is None:
            return
        data = _encode(replace(self._me, master=self._master))
        await _future(self._loop, self._client.set_async(f"{self._path}/{self._name}", data))
        self._published_at = time.monotonic()


def _same(a: Role, b: Role) -> bool:
    """Roles differ by kind, by the master followed (not its position), or by reason."""
    if a.kind != b.kind or a.reason != b.reason:
        return False
    if a.master is None or b.master is None:
        return a.master is b.master
    return (a.master.node_id, a.master.replication_address) == (
        b.master.node_id, b.master.replication_address,
    )  # fmt: skip


def _describe(role: Role) -> str:
    if role.kind == "slave" and role.master is not None:
        return f"slave of {role.master.node_id} ({role.master.replication_address})"
    return role.kind if role.kind == "master" else f"waiting: {role.reason}"
