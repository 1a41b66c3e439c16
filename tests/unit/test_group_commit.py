"""Group commit (store/groupcommit.py): what goes into one group, and that nothing queued is
left unwritten; and the log line of a write nobody awaits that fails."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest

from dovecote.broker.regions import log_failure
from dovecote.core.errors import StoreFailedError
from dovecote.store.groupcommit import GATHER_TURNS, GroupWriter


class Recorder:
    def __init__(self) -> None:
        self.groups: list[list[str]] = []

    async def write_group(self, group: list[str]) -> None:
        self.groups.append(group)


async def test_writes_nobody_waits_for_join_the_next_urgent_one() -> None:
    recorder = Recorder()
    writer = GroupWriter(recorder.write_group)
    writer.start()
    lazy = writer.submit("removal", urgent=False)
    await asyncio.sleep(0)  # the writer starts waiting for company
    await writer.submit("add")
    await lazy
    assert recorder.groups == [["removal", "add"]]
    await writer.stop()


async def test_a_write_nobody_waits_for_is_written_alone_soon() -> None:
    recorder = Recorder()
    writer = GroupWriter(recorder.write_group)
    writer.start()
    await asyncio.wait_for(writer.submit("removal", urgent=False), timeout=5)
    assert recorder.groups == [["removal"]]
    await writer.stop()


async def test_urgent_writes_do_not_wait_and_keep_their_order() -> None:
    recorder = Recorder()
    writer = GroupWriter(recorder.write_group)
    writer.start()
    first = writer.submit("a")
    second = writer.submit("b", urgent=False)
    await asyncio.gather(first, second)
    await writer.submit("c")
    assert recorder.groups == [["a", "b"], ["c"]]
    await writer.stop()


async def _producer(writer: GroupWriter[str], name: str, sends: int, late_by: int) -> None:
    """Sends and waits for each, answering ``late_by`` loop turns after it is woken."""
    for n in range(sends):
        await writer.submit(f"{name}{n}")
        for _ in range(late_by):
            await asyncio.sleep(0)


async def test_a_group_waits_a_few_turns_for_as_many_writers_as_the_last_had() -> None:
    # Three synchronous producers woken by one group answer one and two turns apart: their
    # next sends still make one group, not a group of the first to answer and then the rest.
    recorder = Recorder()
    writer = GroupWriter(recorder.write_group)
    writer.start()
    await asyncio.gather(*(_producer(writer, name, 3, late) for name, late in
                           (("a", 0), ("b", 1), ("c", 2))))  # fmt: skip
    assert recorder.groups == [["a0", "b0", "c0"], ["a1", "b1", "c1"], ["a2", "b2", "c2"]]
    await writer.stop()


async def test_the_wait_for_more_writers_is_short_and_a_lone_writer_does_not_wait() -> None:
    recorder = Recorder()
    writer = GroupWriter(recorder.write_group)
    writer.start()
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async def turns_to_write(item: str) -> int:
        start = turns
        await writer.submit(item)
        return turns - start

    ticking = asyncio.create_task(ticker())
    await asyncio.gather(*(writer.submit(name) for name in "abc"))
    after_three = await turns_to_write("a1")  # the other two are gone: waits, but not long
    after_one = await turns_to_write("a2")
    ticking.cancel()
    assert recorder.groups == [["a", "b", "c"], ["a1"], ["a2"]]
    assert after_one < after_three <= after_one + GATHER_TURNS
    await writer.stop()


async def test_stop_writes_what_is_queued() -> None:
    recorder = Recorder()
    writer = GroupWriter(recorder.write_group)
    writer.start()
    lazy = writer.submit("removal", urgent=False)
    await writer.stop()
    assert lazy.done() and recorder.groups == [["removal"]]


async def test_work_nobody_awaits_logs_its_failure(caplog: pytest.LogCaptureFixture) -> None:
    failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    failed.set_exception(OSError("disk full"))
    fine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    fine.set_result(None)
    with caplog.at_level(logging.ERROR, logger="dovecote.broker"):
        log_failure("a removal")(failed)
        log_failure("a removal")(fine)
    assert [r.getMessage() for r in caplog.records] == ["a removal failed: disk full"]


async def test_a_write_nobody_waits_for_queued_while_the_writer_is_busy_is_still_written() -> None:
    # Its timer fires while the writer is between groups (housekeeping): that wake-up must
    # not be lost, or the write would wait for the next urgent one, maybe forever.
    recorder = Recorder()
    housekeeping = asyncio.Event()

    async def after_group() -> None:
        housekeeping.set()
        await asyncio.sleep(0.05)  # longer than the timer of a write nobody waits for

    writer = GroupWriter(recorder.write_group, after_group)
    writer.start()
    await writer.submit("add")
    await housekeeping.wait()
    lazy = writer.submit("removal", urgent=False)
    await asyncio.wait_for(lazy, timeout=5)
    assert recorder.groups == [["add"], ["removal"]]
    await writer.stop()


async def test_failing_housekeeping_does_not_stop_the_writer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder()
    failures = 0

    async def after_group() -> None:
        nonlocal failures
        failures += 1
        raise OSError("disk full while removing a file")

    writer = GroupWriter(recorder.write_group, after_group)
    writer.start()
    with caplog.at_level(logging.ERROR, logger="dovecote.store"):
        await writer.submit("first")
        await asyncio.wait_for(writer.submit("second"), timeout=5)
    assert recorder.groups == [["first"], ["second"]]
    assert failures >= 1 and "housekeeping" in caplog.text
    await writer.stop()


async def test_housekeeping_runs_between_groups_under_steady_load() -> None:
    # Each group brings the next batch before it is done: the queue never empties, and the
    # owner's work between groups (the journal index catching up) must not wait for a lull.
    events: list[str] = []
    writer: GroupWriter[str]

    async def write_group(group: list[str]) -> None:
        events.extend(group)
        if len(events) < 8:
            writer.submit(f"batch{len(events)}")
        await asyncio.sleep(0)

    async def after_group() -> None:
        events.append("housekeeping")

    writer = GroupWriter(write_group, after_group)
    writer.start()
    await writer.submit("batch0")
    for _ in range(20):
        await asyncio.sleep(0)
    await writer.stop()
    batches = [i for i, e in enumerate(events) if e.startswith("batch")]
    assert len(batches) >= 4
    assert all("housekeeping" in events[a:b] for a, b in itertools.pairwise(batches))


async def test_exclusive_work_runs_between_groups_never_during_one() -> None:
    # The SQL store's checkpoint moves what the groups wrote: it must not see half a group.
    events: list[str] = []
    release = asyncio.Event()

    async def write_group(group: list[str]) -> None:
        events.append(f"start {group}")
        await release.wait()
        events.append(f"end {group}")

    async def checkpoint() -> None:
        events.append("checkpoint")

    writer = GroupWriter(write_group)
    writer.start()
    first = writer.submit("a")
    for _ in range(5):
        await asyncio.sleep(0)  # the writer is inside the group now
    exclusive = asyncio.ensure_future(writer.run_exclusive(checkpoint))
    second = writer.submit("b")
    for _ in range(5):
        await asyncio.sleep(0)
    assert events == ["start ['a']"] and not exclusive.done()
    release.set()
    await asyncio.wait_for(asyncio.gather(first, second, exclusive), timeout=5)
    assert events.index("checkpoint") == events.index("end ['a']") + 1
    assert events[-2:] == ["start ['b']", "end ['b']"]
    await writer.stop()


async def test_exclusive_work_raises_to_its_caller_and_the_writer_goes_on() -> None:
    recorder = Recorder()

    async def failing() -> None:
        raise OSError("database gone")

    writer = GroupWriter(recorder.write_group)
    writer.start()
    with pytest.raises(OSError, match="database gone"):
        await asyncio.wait_for(writer.run_exclusive(failing), timeout=5)
    await asyncio.wait_for(writer.submit("after"), timeout=5)
    assert recorder.groups == [["after"]]
    await writer.stop()


async def test_exclusive_work_whose_caller_gave_up_is_not_run() -> None:
    ran: list[str] = []
    release = asyncio.Event()

    async def write_group(group: list[str]) -> None:
        await release.wait()

    async def work(name: str) -> None:
        ran.append(name)

    writer = GroupWriter(write_group)
    writer.start()
    group = writer.submit("a")
    await asyncio.sleep(0)
    abandoned = asyncio.ensure_future(writer.run_exclusive(lambda: work("abandoned")))
    kept = asyncio.ensure_future(writer.run_exclusive(lambda: work("kept")))
    await asyncio.sleep(0)
    abandoned.cancel()
    release.set()
    await asyncio.wait_for(asyncio.gather(group, kept), timeout=5)
    assert ran == ["kept"]
    await writer.stop()
    with pytest.raises(OSError, match="stopping"):
        await writer.run_exclusive(lambda: work("late"))


class NowRecorder(Recorder):
    """An owner that can also write a group at once (the journal with a fast fsync)."""

    def __init__(self, can: bool = True) -> None:
        super().__init__()
        self.now: list[list[str]] = []
        self.can = can

    def write_now(self, group: list[str]) -> bool:
        if not self.can:
            return False
        if "bad" in group:
            raise OSError(28, "No space left on device")
        self.now.append(group)
        return True


async def _quiet(writer: GroupWriter[str]) -> None:
    """Until the writer has gone back to sleep."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_lone_writer_is_written_in_its_own_turn_with_what_waited() -> None:
    owner = NowRecorder()
    writer = GroupWriter(owner.write_group, write_now=owner.write_now)
    writer.start()
    await writer.submit("a0")  # the first goes through the writer: alone since when?
    await _quiet(writer)
    lazy = writer.submit("removal", urgent=False)
    second = writer.submit("a1")
    # Done when submit returns: nothing had to wait for another turn of the loop.
    assert second.done() and lazy.done()
    assert owner.groups == [["a0"]] and owner.now == [["removal", "a1"]]
    await writer.stop()


async def test_writers_of_several_tasks_still_share_groups() -> None:
    owner = NowRecorder()
    writer = GroupWriter(owner.write_group, write_now=owner.write_now)
    writer.start()
    await asyncio.gather(*(_producer(writer, name, 3, 0) for name in "abc"))
    assert owner.now == []
    assert owner.groups == [["a0", "b0", "c0"], ["a1", "b1", "c1"], ["a2", "b2", "c2"]]
    await writer.stop()


async def test_a_lone_writer_the_owner_cannot_write_at_once_goes_through_the_writer() -> None:
    owner = NowRecorder(can=False)
    writer = GroupWriter(owner.write_group, write_now=owner.write_now)
    writer.start()
    for item in ("a0", "a1", "a2"):
        await writer.submit(item)
        await _quiet(writer)
    assert owner.groups == [["a0"], ["a1"], ["a2"]] and owner.now == []
    await writer.stop()


async def test_a_lone_writer_whose_write_fails_is_told_and_the_store_degrades() -> None:
    owner = NowRecorder()
    writer = GroupWriter(owner.write_group, write_now=owner.write_now)
    writer.start()
    await writer.submit("a0")
    await _quiet(writer)
    failed = writer.submit("bad")
    assert failed.done()
    with pytest.raises(StoreFailedError, match="No space left"):
        await failed
    assert writer.degraded is not None and "No space left" in writer.degraded
    await writer.stop()
