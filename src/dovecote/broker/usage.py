"""systemUsage (compatibility M6, S4): memory, store and temp limits, and producer flow control.

A ``Usage`` counts bytes against a limit and may have a parent (a destination's memory usage
counts in the broker's too); it is full when it or any parent is over its limit. Each entry
a destination holds is charged to the usages it weighs on and released exactly once when the
broker lets go of it. Producers that meet a full usage wait in ``SystemUsage.wait_for`` until
a release makes room, or get a ``ResourceLimitError`` when ``send_fail_if_no_space`` is set.

The temp store holds the bodies of non-persistent messages spilled out of memory by
destinations whose producer flow control is off: one append-only file, wiped at start and
emptied whenever nothing in it is live.

The store and temp limits are kept within what their disks can hold: cut at start (as
ActiveMQ does) and, by a ``DiskWatch``, every few seconds while the broker runs, so that when
another process fills the disk producers meet the limit (and wait, or get the error naming
it) instead of the disk's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dovecote.core.errors import ResourceLimitError

log = logging.getLogger("dovecote.broker.usage")


class Usage:
    __slots__ = ("_on_release", "limit", "name", "parent", "used")
    _on_release: Callable[[], None] | None

    def __init__(
        self,
        name: str,
        limit: int,
        parent: Usage | None = None,
        on_release: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.limit = limit
        self.parent = parent
        self.used = 0
        self._on_release = (
            on_release
            if on_release is not None
            else (parent._on_release if parent is not None else None)
        )

    @property
    def full(self) -> bool:
        """Whether it or a parent has used all of its limit."""
        return not self.has_room(0)

    def has_room(self, margin: int) -> bool:
        """Whether it and its parents each have ``margin`` bytes to spare."""
        usage: Usage | None = self
        while usage is not None:
            if usage.limit > 0 and usage.used + margin >= usage.limit:
                return False
            usage = usage.parent
        return True

    def above(self, fraction: float) -> bool:
        """Whether it or a parent has used more than ``fraction`` of its limit."""
        if 0 < self.limit and self.used > fraction * self.limit:
            return True
        return self.parent.above(fraction) if self.parent is not None else False

    def room_below(self, fraction: float) -> int | None:
        """Bytes left below ``fraction`` of its limit and its parents' (None: no limit)."""
        room = int(fraction * self.limit) - self.used if self.limit > 0 else None
        if self.parent is not None:
            above = self.parent.room_below(fraction)
            if above is not None:
                room = above if room is None else min(room, above)
        return room

    def set_limit(self, limit: int) -> None:
        """A new limit (the disk's room changed); producers waiting for room are woken."""
        raised = self.limit > 0 and (limit == 0 or limit > self.limit)
        self.limit = limit
        if raised and self._on_release is not None:
            self._on_release()

    def charge(self, amount: int) -> None:
        usage: Usage | None = self
        while usage is not None:
            usage.used += amount
            usage = usage.parent

    def release(self, amount: int) -> None:
        usage: Usage | None = self
        while usage is not None:
            usage.used -= amount
            usage = usage.parent
        if self._on_release is not None:
            self._on_release()

    def describe(self) -> str:
        """The usage that is full, for error messages."""
        if 0 < self.limit <= self.used:
            return f"{self.name} limit of {self.limit} bytes reached ({self.used} used)"
        return self.parent.describe() if self.parent is not None else f"{self.name} has room"


class SystemUsage:
    def __init__(
        self,
        memory_limit: int,
        store_limit: int,
        temp_limit: int,
        send_fail_if_no_space: bool,
    ) -> None:
        self.memory = Usage("broker memory", memory_limit, on_release=self._wake)
        self.store = Usage("store", store_limit, on_release=self._wake)
        self.temp = Usage("temp store", temp_limit, on_release=self._wake)
        self.send_fail_if_no_space = send_fail_if_no_space
        self._waiters: list[asyncio.Future[None]] = []
        self._blocked: set[str] = set()

    def _wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def wait_for(self, usage: Usage, what: str) -> None:
        """Block the sender until ``usage`` has room (producer flow control), or fail it."""
        if not usage.full:
            return
        if self.send_fail_if_no_space:
            raise ResourceLimitError(f"cannot send to {what}: {usage.describe()}")
        if what not in self._blocked:
            self._blocked.add(what)
            log.info("producer flow control: %s; blocking producers to %s", usage.describe(), what)
        loop = asyncio.get_running_loop()
        while usage.full:
            waiter = loop.create_future()
            self._waiters.append(waiter)
            await waiter
        self._blocked.discard(what)


class TempStore:
    """Spilled message bodies in one file under the data directory, gone at restart.

    A body the disk has no room for stays in memory instead (until the temp store next
    empties), and the temp limit is lowered to what the temp store holds, so that producers
    wait (or fail) at the limit; the limit comes back when the temp store empties."""

    def __init__(self, directory: Path, usage: Usage | None = None) -> None:
        self.directory = directory
        self.usage = usage
        """The temp limit's usage, lowered when the disk is full (None: left alone)."""
        self._fd = -1
        self._size = 0
        self._live = 0
        self._held: dict[int, bytes] = {}
        """Bodies the disk had no room for, by the negative offsets given out for them."""
        self._limit_before: int | None = None
        """The temp limit before a full disk lowered it (None: not lowered)."""

    def open(self) -> None:
        if self.directory.exists():  # the temp store is wiped at start
            import shutil  # (only then: shutil and its archivers are idle memory otherwise)

            shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.directory / "spill.dat", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def put(self, body: bytes) -> tuple[int, int]:
        if self._fd < 0:
            self.open()
        offset = self._size
        try:
            written = 0
            while written < len(body):  # (a short write: the next one says why)
                written += os.pwrite(self._fd, memoryview(body)[written:], offset + written)
        except OSError as exc:
            return self._hold(body, exc)
        self._size += len(body)
        self._live += 1
        return offset, len(body)

    def _hold(self, body: bytes, exc: OSError) -> tuple[int, int]:
        """No room on disk for ``body``: it stays in memory, and the temp limit is lowered
        to what is used now (one WARNING until the temp store empties)."""
        where = -(len(self._held) + 1)
        self._held[where] = body
        self._live += 1
        usage = self.usage
        if usage is not None and self._limit_before is None:
            self._limit_before = usage.limit
            usage.set_limit(max(1, usage.used))
        if len(self._held) == 1:
            log.warning(
                "temp store could not write (%s, %s): spilled messages the disk has no room "
                "for are kept in memory, and producers to destinations without flow control "
                "meet the temp store limit (%d MiB) until consumers empty the temp store",
                exc.strerror or exc, self.directory, (usage.limit if usage else 0) >> 20,
            )  # fmt: skip
        return where, len(body)

    def get(self, where: tuple[int, int]) -> bytes:
        if where[0] < 0:
            return self._held[where[0]]
        return os.pread(self._fd, where[1], where[0])

    def drop(self) -> None:
        """One spilled body is no longer needed; with none left, the file starts over."""
        self._live -= 1
        if self._live == 0 and (self._size or self._held):
            os.ftruncate(self._fd, 0)
            self._size = 0
            self._held.clear()
            if self.usage is not None and self._limit_before is not None:
                self.usage.set_limit(self._limit_before)
                self._limit_before = None


DISK_SHARE = 0.9
"""The share of a disk's room a limit may take: the limit counts messages' bytes, and their
records, the index and the acks that free space take some more of the disk."""


@dataclass(frozen=True, slots=True)
class DiskRoom:
    """What a directory's filesystem can give a store kept there."""

    mount: Path
    """The directory, or its nearest existing parent (the store may not have made it yet)."""
    free: int
    held: int
    """Bytes the store's files there hold already (allocated blocks: a preallocated data
    file counts whole): its own to reuse."""

    @property
    def room(self) -> int:
        return int((self.free + self.held) * DISK_SHARE)


def disk_room(directory: Path) -> DiskRoom:
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    stat = os.statvfs(existing)  # shutil.disk_usage's figure, without importing shutil
    free = stat.f_bavail * stat.f_frsize
    held = 0
    if directory.exists():
        for path in directory.rglob("*"):
            with contextlib.suppress(OSError):  # (a file removed meanwhile)
                if path.is_file():
                    held += path.stat().st_blocks * 512
    return DiskRoom(existing.resolve(), free, held)


def capped(limit: int, room: int) -> int:
    """``limit`` (0: none) within ``room``; never 0, which would mean no limit."""
    return max(1, room if limit == 0 else min(limit, room))


@dataclass(slots=True)
class WatchedLimit:
    usage: Usage
    configured: int
    """The limit the configuration asks for (0: none)."""
    directory: Path
    baseline: int
    """The limit at start (cut to the disk then, and logged so)."""
    lowered: bool = False

    def check(self) -> None:
        usage = self.usage
        disk = disk_room(self.directory)
        limit = capped(self.configured, disk.room)
        if limit == usage.limit:
            return
        usage.set_limit(limit)
        # Noticed (logged) only past a hundredth of the limit at start: the store's own
        # index and logs beside it move the room a little all the time.
        lowered = limit < self.baseline - self.baseline // 100
        if lowered and not self.lowered:
            log.warning(
                "%s limit lowered to %d MiB: the disk at %s has %d MiB free (%d MiB held by "
                "it); producers meet the limit instead of the disk's end",
                usage.name, limit >> 20, disk.mount, disk.free >> 20, disk.held >> 20,
            )  # fmt: skip
        elif self.lowered and not lowered:
            log.info("%s limit back to %d MiB: its disk has room again", usage.name, limit >> 20)
        else:
            log.debug("%s limit now %d MiB (the disk at %s: %d MiB free)",
                      usage.name, limit >> 20, disk.mount, disk.free >> 20)  # fmt: skip
        self.lowered = lowered


class DiskWatch:
    """Every ``period_s``, each watched limit set to what its disk can hold (at most the
    configured limit): lowered when another process fills the disk (one WARNING), back up
    once it has room again (one INFO). A few stat calls per period, never per message."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self.limits: list[WatchedLimit] = []
        self._task: asyncio.Task[None] | None = None

    def watch(self, usage: Usage, configured: int, directory: Path) -> None:
        self.limits.append(WatchedLimit(usage, configured, directory, usage.limit))

    def start(self) -> None:
        if self.period_s > 0 and self.limits and self._task is None:
            self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            self.check()

    def check(self) -> None:
        for watched in self.limits:
            try:
                watched.check()
            except OSError as exc:  # the disk cannot even be asked: again next period
                log.debug("disk check of %s failed: %s", watched.directory, exc)
