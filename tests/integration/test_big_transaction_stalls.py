"""Issue 28's two stalls met under the Spark benchmark, both from one big transaction held
by the store cursor: the journal keeps a transaction's sends in one record, and paging a
queue in read that whole record again for every page of 100 messages (100k messages: a
thousand decodes of 100 MB, minutes of a busy event loop).

- Two backlogs above the memory limit: the broker answered nothing, stream requests and
  the admin API included, for over 30 s.
- SIGTERM while a stream request paged such a backlog in: the broker spun at 100% CPU for
  over 10 minutes before exiting.

A real broker process, our Python client sending as the Spark writer does (one transaction
per partition), stream requests as the Spark source makes them. The short form sends 20,000
messages per transaction (without the fix: over a minute of paging); DOVECOTE_LONG=1 sends
100,000.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers import BrokerProcess, running_broker
from dovecote.client import ConnectionFactory, Message
from dovecote.client.streams import StreamClient
from dovecote.core.destinations import queue

COUNT = 100_000 if os.environ.get("DOVECOTE_LONG") else 20_000
# A small memory limit: the store cursor holds nearly all of each transaction.
CONFIG = "[usage]\nmemory_limit = 4194304\n"
BODY = "x" * 1024
ANSWER_WITHIN_S = 5.0
EXIT_WITHIN_S = 5.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with running_broker(CONFIG, workdir=tmp_path) as process:
        yield process


def _url(broker: BrokerProcess) -> str:
    return f"tcp://127.0.0.1:{broker.openwire_port}"


def _send_in_one_transaction(broker: BrokerProcess, name: str) -> None:
    """As the Spark writer sends a partition: persistent, one transaction."""
    with ConnectionFactory(_url(broker)).create_connection() as connection:
        session = connection.create_session(transacted=True)
        producer = session.create_producer(queue(name))
        for _ in range(COUNT):
            producer.send(Message(BODY), persistent=True)
        session.commit()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _admin_get(broker: BrokerProcess) -> float:
    started = time.monotonic()
    url = f"http://127.0.0.1:{broker.console_port}/api/broker"
    with urllib.request.urlopen(url, timeout=120) as response:
        response.read()
    return time.monotonic() - started


def test_two_stored_backlogs_above_the_memory_limit_keep_the_broker_answering(
    broker: BrokerProcess,
) -> None:
    writers = [
        threading.Thread(target=_send_in_one_transaction, args=(broker, f"stalls.{i}"))
        for i in range(2)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    plans: dict[str, int] = {}
    slowest: dict[str, float] = {}

    def plan(name: str) -> None:
        with StreamClient(_url(broker), queue(name)) as stream:
            started = time.monotonic()
            plans[name] = stream.plan(after=0, splits=2).count
            slowest[name] = time.monotonic() - started

    readers = [threading.Thread(target=plan, args=(f"stalls.{i}",)) for i in range(2)]
    for reader in readers:
        reader.start()
    admin = []
    while any(reader.is_alive() for reader in readers):
        admin.append(_admin_get(broker))  # the admin API meanwhile
    for reader in readers:
        reader.join()
    assert plans == {"stalls.0": COUNT, "stalls.1": COUNT}
    assert max(slowest.values()) < 2 * ANSWER_WITHIN_S, slowest
    assert max(admin) < ANSWER_WITHIN_S, admin
    # And the reads themselves, as the Spark source's executors make them.
    with StreamClient(_url(broker), queue("stalls.0")) as stream:
        plan_ = stream.plan(after=0, max_messages=COUNT // 4)
        started = time.monotonic()
        blocks = stream.read_blocks(0, plan_.end)
        assert time.monotonic() - started < ANSWER_WITHIN_S
        assert blocks
        assert stream.commit(plan_.end) == COUNT // 4


def test_sigterm_ends_a_broker_paging_in_a_big_committed_transaction(
    broker: BrokerProcess,
) -> None:
    _send_in_one_transaction(broker, "stalls.term")
    pid = broker.process.pid
    idle = _cpu_seconds(pid)
    # A stream request pages the whole backlog in; SIGTERM once the broker is busy with it,
    # or once it has answered (paging a fixed broker takes less than the 0.3 s of CPU).
    planner = threading.Thread(
        target=lambda: StreamClient(_url(broker), queue("stalls.term")).plan(after=0),
        daemon=True,
    )
    planner.start()
    deadline = time.monotonic() + 30
    while _cpu_seconds(pid) - idle < 0.3 and planner.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    signalled = time.monotonic()
    broker.process.send_signal(signal.SIGTERM)
    try:
        broker.process.wait(60)
    finally:
        took = time.monotonic() - signalled
    assert broker.process.returncode == 0
    assert took < EXIT_WITHIN_S, f"the broker took {took:.1f}s to exit after SIGTERM"
