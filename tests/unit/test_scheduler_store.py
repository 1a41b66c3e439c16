"""The scheduler's job log (store/schedules.py): what is written comes back at the next
start, a torn last frame is dropped, and the log is rewritten when mostly dead."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dovecote.core.destinations import queue
from dovecote.core.message import Message
from dovecote.store import schedules
from dovecote.store.schedules import JobLog, StoredJob


def job(n: int, body: bytes = b"x") -> StoredJob:
    message = Message(f"ID:c:1:1:{n}", queue("q"), body, persistent=True,
                      properties={"AMQ_SCHEDULED_DELAY": 1000, "s": "t"})  # fmt: skip
    return StoredJob(f"ID:c:1:1:{100 + n}", message, 500, "", 1000, 0, 2, 1500, True)


async def test_jobs_come_back_with_their_latest_state(tmp_path: Path) -> None:
    log = JobLog(tmp_path)
    assert log.load() == []
    a, b, c = job(1), job(2), job(3)
    await log.write(added=[a, b])
    a.next_time, a.repeat, a.fired = 2000, 1, 1
    await log.write(added=[c], rescheduled=[a], removed=[b.job_id])
    await log.close()
    again = JobLog(tmp_path)
    assert again.load() == [a, c]
    await again.close()


async def test_a_torn_last_frame_is_dropped_and_the_log_goes_on(tmp_path: Path) -> None:
    log = JobLog(tmp_path)
    log.load()
    await log.write(added=[job(1)])
    await log.write(added=[job(2)])
    await log.close()
    data = log.path.read_bytes()
    log.path.write_bytes(data[:-3])  # a crash while the second frame was being written
    again = JobLog(tmp_path)
    assert [j.job_id for j in again.load()] == [job(1).job_id]
    await again.write(added=[job(3)])
    await again.close()
    third = JobLog(tmp_path)
    assert [j.job_id for j in third.load()] == [job(1).job_id, job(3).job_id]
    await third.close()


async def test_a_mostly_dead_log_is_rewritten_with_its_live_jobs(
    tmp_path: Path, monkeypatch: object
) -> None:
    monkeypatch.setattr(schedules, "COMPACT_MIN_BYTES", 4096)  # type: ignore[attr-defined]
    log = JobLog(tmp_path)
    log.load()
    keep = job(0, b"k" * 100)
    await log.write(added=[keep])
    for n in range(1, 40):
        gone = job(n, b"g" * 500)
        await log.write(added=[gone])
        await log.write(removed=[gone.job_id])
    assert log.path.stat().st_size < 4096 + 2000  # rewritten along the way
    await log.close()
    again = JobLog(tmp_path)
    assert again.load() == [keep]
    await again.close()


async def test_writes_made_together_share_one_fsync(tmp_path: Path, log_fsyncs: list[str]) -> None:
    log = JobLog(tmp_path)
    log.load()
    log_fsyncs.clear()
    jobs = [job(n) for n in range(20)]
    await asyncio.gather(*[log.write(added=[j]) for j in jobs])
    assert 1 <= len(log_fsyncs) <= 2  # group commit: not one fsync each
    await log.close()
    again = JobLog(tmp_path)
    assert again.load() == jobs  # every frame, in the order written
    await again.close()
