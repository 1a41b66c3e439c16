"""Group commit (store/groupcommit.py): what goes into one group, and that nothing queued is
left unwritten; and the log line of a write nobody awaits that fails."""

from __future__ import annotations

import asyncio
import logging

import pytest

from dovecote.broker.regions import log_failure
from dovecote.store.groupcommit import GroupWriter


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
