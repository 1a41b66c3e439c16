"""Group commit: writers queue their batches and wait; one task writes every batch queued at
that moment as one group (one fsync, one database transaction) and wakes them all. While a
group is being made durable the next one gathers, so concurrent producers share the cost of
each sync (compatibility M2). A failure of a group fails each of its writers with the error. Batches
nobody waits for (removals settled on dispatch) wait a moment for one somebody waits for, so
that both share a group. A writer alone (the same task as the last, the writer idle: a lone
synchronous producer) has its group written at once in its own turn of the loop, when its
owner can do so without waiting (``write_now``: the journal, when its fsync is fast).

A group refused by the disk or the database puts the store in degraded mode (health.py).
Every batch is still tried (each refused one's writers get the disk's reason). The store
leaves the mode when a group that adds to it succeeds, and the owner's ``probe`` (if any)
agrees: a small send can fit in room a larger one could not have, and a removal always
does. The probe also tries on its own every ``RETRY_S``, so that the mode ends with no
write to tell it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from dovecote.core.errors import StoreFailedError
from dovecote.store.health import WRITES, StoreHealth

T = TypeVar("T")
STOP_TIMEOUT_S = 30.0
LAZY_WAIT_S = 0.002
"""How long writes nobody waits for wait for one somebody waits for, to share its group."""
GATHER_TURNS = 4
"""Loop turns a group may wait, before it is written, for as many waiting writers as the
last group had. Producers woken together by one group's sync answer a moment apart (each a
process of its own, on a busy machine), and the first to answer would otherwise make a group
of one; waiting, groups are larger and synchronous producers faster
(docs/performance.md). A lone producer never waits
(the last group had one), and the wait is a few turns of the loop, never a timer."""
RETRY_S = 2.0
"""While writes fail: how often the probe tries on its own."""
log = logging.getLogger("dovecote.store")


class GroupWriter(Generic[T]):
    def __init__(
        self,
        write_group: Callable[[list[T]], Awaitable[None]],
        after_group: Callable[[], Awaitable[None]] | None = None,
        adds: Callable[[T], bool] | None = None,
        write_now: Callable[[list[T]], bool] | None = None,
    ) -> None:
        self._write_group = write_group
        self._write_now = write_now
        """Writes a group at once, without waiting (False, having written nothing, when it
        would have to wait: a slow fsync): how a lone writer's batch is written in its own
        turn of the loop (see ``submit``)."""
        self._last_submitter: object = None
        """The task of the last urgent batch."""
        self._after_group = after_group
        self.health = StoreHealth()
        self._adds = adds
        """Whether a batch adds to the store; asked only while writes fail."""
        self.probe: Callable[[], Awaitable[None]] | None = None
        """Set by an owner that can try what failed (the journal: starting a data file)."""
        self._next_probe = 0.0
        self._retry_timer: asyncio.TimerHandle | None = None
        self._pending: list[tuple[T, asyncio.Future[None]]] = []
        # The writer sleeps on a bare future that submit resolves: it wakes one turn of the
        # loop later (an Event, or wait_for, took two or three turns per group).
        self._waiter: asyncio.Future[None] | None = None
        self._lazy_timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # Work to run between groups (run_exclusive), by the writer itself: what runs in its
        # task needs no lock against the groups (an asyncio.Lock taken around each group
        # was ten interpreted calls per group, one group per send for a lone producer).
        self._exclusive: list[tuple[Callable[[], Awaitable[None]], asyncio.Future[None]]] = []
        self._closing = False
        self._urgent = 0
        """Batches queued since the last group that somebody waits for."""
        self._last_urgent = 0
        self._woken = False
        """Asked to run since it last looked: the writer does not go to sleep then (a wake
        that comes while it is busy is not lost)."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The writer's loop, once started (asking asyncio is a getpid() system call)."""
        assert self._loop is not None
        return self._loop

    @property
    def degraded(self) -> str | None:
        return self.health.degraded

    def start(self) -> None:
        # (Kept: asyncio.get_running_loop() is a getpid() system call each time.)
        self._loop = asyncio.get_running_loop()
        self._closing = False
        self._woken = False
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Finish the group being written and every batch already queued, then end: a group
        is never cut in half (its records on disk but not yet applied)."""
        if self._task is not None:
            self._closing = True
            self.wake()
            try:
                await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT_S)
            except TimeoutError:
                log.error("store writer did not finish within %ss; stopping it", STOP_TIMEOUT_S)
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            self._task = None
        for timer in (self._lazy_timer, self._retry_timer):
            if timer is not None:
                timer.cancel()
        self._lazy_timer = self._retry_timer = None
        # Written or run by nobody: fail them rather than hang them.
        for future in [f for _, f in self._pending] + [f for _, f in self._exclusive]:
            if not future.done():
                future.set_exception(OSError("the store stopped"))
        self._pending.clear()
        self._exclusive.clear()

    def submit(self, item: T, urgent: bool = True) -> asyncio.Future[None]:
        """Queue one batch now (its place in the order is taken here, not when awaited);
        the future is done once its group is durable. A batch that is not ``urgent``
        (nobody waits for it) may wait up to LAZY_WAIT_S for an urgent one to share its
        group: a consumer's removal then goes with the next send's add, one group (one
        index transaction) instead of two."""
        if self._closing or self._task is None:
            raise OSError("the store is stopping")
        loop = self._loop
        assert loop is not None
        future: asyncio.Future[None] = loop.create_future()
        self._pending.append((item, future))
        if urgent:
            self._urgent += 1
            # The same task as the last urgent batch, the last group had only one, and the
            # writer is idle: nobody else is writing, so nobody would share the group. Written
            # here and now (one fsync, the caller not suspended): the writer's wake and the
            # caller's, two turns of the loop, cost a lone sync producer more than the rest
            # of its send. (Producers that share groups keep sharing them: the last group
            # had several, or the last batch was another task's.)
            submitter = asyncio.current_task(loop)
            alone = (
                submitter is self._last_submitter
                and submitter is not None
                and self._last_urgent <= 1
            )
            self._last_submitter = submitter
            if alone and self._idle() and self._write_alone():
                return future
            self.wake()
        elif self._lazy_timer is None:
            # The writer is not woken for it now: an urgent batch, or this timer, will.
            self._lazy_timer = loop.call_later(LAZY_WAIT_S, self.wake)
        return future

    @property
    def waiting(self) -> bool:
        """Whether a batch someone waits for is queued for the next group."""
        return self._urgent > 0

    def wake(self) -> None:
        """Wake the writer: it writes what is queued, then runs ``after_group`` (which is
        also how its owner gets idle work done between groups)."""
        self._woken = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _idle(self) -> bool:
        """Asleep with nothing to do but what was just queued (no group under way, none
        asked for, no exclusive work, writes not failing)."""
        return (
            self._write_now is not None
            and self._waiter is not None
            and not self._woken
            and self._urgent == 1
            and not self._exclusive
            and not self.health.refusing_writes
        )

    def _write_alone(self) -> bool:
        """Write what is queued now, in the caller's turn; False when ``write_now`` could
        not without waiting (then the writer writes it)."""
        assert self._write_now is not None
        group = self._pending
        failure: Exception | None = None
        try:
            if not self._write_now([item for item, _ in group]):
                return False
        except Exception as exc:
            failure = exc
        self._pending = []
        self._take_group()
        if failure is not None:
            self._group_failed(group, failure)
            return True
        for _, future in group:
            if not future.done():
                future.set_result(None)
        return True

    def _take_group(self) -> None:
        """What every group does as it leaves the queue."""
        if self._urgent:
            self._last_urgent = self._urgent
        self._urgent = 0
        if self._lazy_timer is not None:
            self._lazy_timer.cancel()  # its batches are in this group
            self._lazy_timer = None

    async def _sleep(self) -> None:
        """Until ``wake``."""
        assert self._loop is not None
        waiter = self._waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    async def _run(self) -> None:
        while not (self._closing and not self._pending):
            # Asleep while nothing is queued, or only batches nobody waits for (their timer
            # is set): woken by an urgent batch, that timer, its owner, or stop.
            if not (self._woken or self._closing):
                await self._sleep()
            self._woken = False
            # After every group, not only once the queue is empty: under steady load it
            # never is, and the owner's work between groups must still be done.
            while True:
                if self._pending:
                    turns = 0
                    while self._urgent < self._last_urgent and turns < GATHER_TURNS:
                        await asyncio.sleep(0)
                        turns += 1
                    await self._write_pending()
                if self._exclusive:
                    await self._run_exclusive_work()
                if self.health.refusing_writes and self.probe is not None:
                    await self._try_probe()
                if self._after_group is not None and not self._closing:
                    await self._housekeeping()
                if not self._pending:
                    break

    async def _write_pending(self) -> None:
        group, self._pending = self._pending, []
        self._take_group()
        try:
            await self._write_group([item for item, _ in group])
        except Exception as exc:  # each writer learns of the failure
            self._group_failed(group, exc)
            return
        adds = self._adds
        if self.health.refusing_writes and adds is not None and any(adds(i) for i, _ in group):
            if self.probe is None:
                self._writes_work()
            else:
                self._next_probe = 0.0  # the probe says, right after this group
        for _, future in group:
            if not future.done():
                future.set_result(None)

    def _group_failed(self, group: list[tuple[T, asyncio.Future[None]]], exc: Exception) -> None:
        failure: Exception = exc
        if isinstance(exc, OSError | StoreFailedError):
            # The disk's or the database's failure (full, an I/O error), not ours: one
            # line, and the writers get an error a client can be told; the trace only
            # when debugging.
            if isinstance(exc, OSError):
                failure = StoreFailedError(f"the store could not write: {_disk_error(exc)}")
            self._writes_failed(str(failure))
            log.debug("store write failed (%d batches refused)", len(group), exc_info=exc)
        else:
            log.exception("store write failed")
        for _, future in group:
            if not future.done():
                future.set_exception(failure)

    def _writes_failed(self, reason: str) -> None:
        self.health.failed(WRITES, reason)
        self._next_probe = asyncio.get_running_loop().time() + RETRY_S
        self._arm_probe(RETRY_S)

    def _arm_probe(self, delay: float) -> None:
        if self.probe is not None and self._retry_timer is None:
            self._retry_timer = asyncio.get_running_loop().call_later(delay, self._probe_due)

    def _writes_work(self) -> None:
        self.health.repaired(WRITES)
        if self._retry_timer is not None:
            self._retry_timer.cancel()
            self._retry_timer = None

    def _probe_due(self) -> None:
        self._retry_timer = None
        self.wake()

    async def _try_probe(self) -> None:
        """While writes fail, every RETRY_S and after a group that adds succeeded: the
        owner's probe tries what failed."""
        assert self.probe is not None
        loop = asyncio.get_running_loop()
        if self._closing:
            return
        if loop.time() < self._next_probe:
            self._arm_probe(self._next_probe - loop.time())
            return
        try:
            await self.probe()
        except (OSError, StoreFailedError) as exc:
            log.debug("store still cannot write: %s", exc)
            self._next_probe = loop.time() + RETRY_S
            self._arm_probe(RETRY_S)
            return
        self._writes_work()

    async def _housekeeping(self) -> None:
        assert self._after_group is not None
        try:
            await self._after_group()
        except Exception:  # housekeeping failed: writing goes on, the next try may do
            log.exception("store housekeeping after a write failed")

    async def run_exclusive(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn`` between groups, never while one is being written: the writer runs it,
        and this returns when it has (raising what it raised)."""
        if self._closing or self._task is None:
            raise OSError("the store is stopping")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._exclusive.append((fn, future))
        self.wake()
        await future

    async def _run_exclusive_work(self) -> None:
        work, self._exclusive = self._exclusive, []
        for fn, future in work:
            if future.done():
                continue  # its caller was cancelled while it waited
            try:
                await fn()
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                continue
            if not future.done():
                future.set_result(None)


def written() -> asyncio.Future[None]:
    """An already finished write (an empty batch, a store with nothing to wait for)."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


def _disk_error(exc: OSError) -> str:
    """An OSError as an operator reads it: what failed, and where."""
    text = exc.strerror or str(exc)
    return f"{text} ({exc.filename})" if exc.filename else text
