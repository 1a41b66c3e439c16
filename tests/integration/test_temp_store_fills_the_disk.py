"""The temp store's spill meets a full disk (issue: hardening): non-persistent messages past
memory on a destination without producer flow control go to data_dir/tmp_storage; when
the disk has no room for them, the producer gets an error naming the temp store limit (or
waits, without send_fail_if_no_space), nothing stalls, nothing sent is lost, and the broker
goes on once consumers take the backlog.

On a small tmpfs mounted for the test (root only: skipped elsewhere). The limits' re-check
(test_disk_fills_while_running.py) is off: the disk's end is met."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from brokers import BrokerProcess, running_broker
from dovecote.protocol.stomp import Frame
from smalldisk import MiB, fill, mounted_tmpfs
from stomplink import Link

BODY = b"x" * 50_000
CONFIG = """
[usage]
memory_limit = 1048576
disk_check_period_ms = 0
{extra}
[[policy.entries]]
pattern = "spill.>"
producer_flow_control = false
"""


@contextmanager
def broker_on_a_full_disk(tmp_path: Path, extra: str) -> Iterator[BrokerProcess]:
    """A broker on a 16 MiB tmpfs that another process then fills to 2 MiB of room."""
    with (
        mounted_tmpfs(tmp_path / "disk", 16) as disk,
        running_broker(CONFIG.format(extra=extra), workdir=disk) as broker,
    ):
        fill(disk, leave=2 * MiB)
        yield broker


def send(link: Link, body: bytes, receipt: str) -> Frame:
    link.send(Frame("SEND", (("destination", "/queue/spill.q"), ("receipt", receipt)), body))
    return link.read()


def test_a_full_disk_under_the_temp_store_fails_the_send_and_loses_nothing(
    tmp_path: Path,
) -> None:
    with broker_on_a_full_disk(tmp_path, "send_fail_if_no_space = true") as broker:
        link = Link(broker.stomp_port)
        accepted: list[bytes] = []
        while (reply := send(link, b"%05d" % len(accepted) + BODY, "r")).command == "RECEIPT":
            accepted.append(b"%05d" % len(accepted) + BODY)
            assert len(accepted) < 400, "the disk never filled"
        assert "temp store limit" in (reply.get("message") or ""), reply
        link.close()
        # A good client meanwhile is served, and takes every message accepted.
        got = [frame.body for frame in Link(broker.stomp_port).take_backlog("/queue/spill.q")]
        assert got == accepted
        # The temp store is empty again: sends are accepted once more.
        link = Link(broker.stomp_port)
        assert send(link, b"after", "after").command == "RECEIPT"
        log = broker.log_text()
        assert log.count("temp store could not write") == 1, log
        assert "Traceback" not in log


def test_without_send_fail_if_no_space_the_producer_waits_for_the_consumer(
    tmp_path: Path,
) -> None:
    with broker_on_a_full_disk(tmp_path, "") as broker:
        total = 200  # 10 MB: more than memory and the disk hold together
        done = threading.Event()

        def produce() -> None:
            link = Link(broker.stomp_port)
            for i in range(total):
                assert send(link, b"%05d" % i + BODY, f"r{i}").command == "RECEIPT"
            done.set()

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        deadline = time.monotonic() + 30
        while "temp store could not write" not in broker.log_text():
            assert time.monotonic() < deadline, broker.log_text()
            time.sleep(0.05)
        assert not done.is_set()  # it waits at the lowered temp limit
        consumer = Link(broker.stomp_port)
        consumer.send(Frame("SUBSCRIBE", (("destination", "/queue/spill.q"), ("id", "1"))))
        bodies = [consumer.read().body for _ in range(total)]
        assert bodies == [b"%05d" % i + BODY for i in range(total)]
        producer.join(30)
        assert done.is_set()
        assert "Traceback" not in broker.log_text()
