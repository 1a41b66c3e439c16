"""A broker process gives the memory of a consumed backlog back to the system once it has
stayed unused for ``[usage] return_free_memory_after_ms``, and not before (a real broker,
100 MiB appended and read away through the Python client, its resident memory from /proc)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from brokers import running_broker
from dovecote.allocator import can_trim, resident_anonymous
from dovecote.client import ConnectionFactory
from dovecote.client.streams import StreamAppender, StreamClient
from dovecote.core.destinations import queue
from dovecote.core.message import BodyType, Message
from dovecote.core.stream_blocks import encode_block

pytestmark = pytest.mark.skipif(not can_trim(), reason="glibc's malloc_trim")
MIB = 1 << 20
AFTER_MS = 3_000


def resident(pid: int) -> int:
    got = resident_anonymous(pid)
    assert got is not None
    return got


def test_a_consumed_backlogs_memory_goes_back_after_the_delay(tmp_path: Path) -> None:
    name = queue("returned")
    config = f"[usage]\nreturn_free_memory_after_ms = {AFTER_MS}\n"
    with running_broker(config, workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        pid = broker.process.pid
        idle = resident(pid)
        with ConnectionFactory(url).create_connection() as connection:
            session = connection.create_session(transacted=True)
            appender = StreamAppender(session, name)
            for b in range(100):  # 100,000 messages of 1 KiB, committed ten blocks at a time
                appender.append(encode_block([
                    Message(f"ID:returned-{b}-{i}", name, os.urandom(512).hex().encode(),
                            BodyType.TEXT)
                    for i in range(1000)
                ]))  # fmt: skip
                if b % 10 == 9:
                    appender.finish()
                    session.commit()
        with StreamClient(url, name) as stream:
            end = stream.plan(after=0).end
            read = sum(len(block) for block in stream.iter_blocks(0, end))
            peak = resident(pid)
            assert stream.commit(end) == 100_000
        drained = time.monotonic()
        assert read > 100 * MIB
        grown = peak - idle
        assert grown > 100 * MIB

        time.sleep(0.5)  # well before the delay: kept for the next burst
        assert resident(pid) - idle > grown // 2

        while resident(pid) - idle > grown // 4 and time.monotonic() - drained < 15:
            time.sleep(0.1)
        assert resident(pid) - idle < grown // 4
