"""Another process fills the disk while the broker runs (issue: hardening, "checked as the
journal grows"): the store limit, cut to the disk at start, is lowered at run time to what
the disk can still hold (one WARNING), so producers meet the store limit (here: the error
naming it, send_fail_if_no_space) instead of the disk's end; once the disk has room again
the limit goes back up (one INFO) and sends are stored again.

On a small tmpfs mounted for the test (root only: skipped elsewhere)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from brokers import BrokerProcess, running_broker
from dovecote.client import ConnectionFactory, JMSError, Message
from smalldisk import MiB, fill, mounted_tmpfs

BODY = "x" * 100_000
CONFIG = """
[store]
journal_max_file_length = 1048576
[usage]
send_fail_if_no_space = true
disk_check_period_ms = 200
"""


def wait_for_log(broker: BrokerProcess, text: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in broker.log_text():
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{broker.log_text()}"
        time.sleep(0.05)


def test_the_store_limit_follows_the_disk_filled_by_another_process(tmp_path: Path) -> None:
    with (
        mounted_tmpfs(tmp_path / "disk", 24) as disk,
        running_broker(CONFIG, workdir=disk) as broker,
    ):
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with ConnectionFactory(url).create_connection() as conn:
            session = conn.create_session()
            producer = session.create_producer(session.queue("filling"))
            for _ in range(5):
                producer.send(Message(BODY), persistent=True)
            ballast = fill(disk, leave=6 * MiB)
            wait_for_log(broker, ": store limit lowered to")

            sent = 5
            with pytest.raises(JMSError) as refused:
                for _ in range(200):
                    producer.send(Message(BODY), persistent=True)
                    sent += 1
            assert "store limit" in str(refused.value), refused.value
            assert 5 < sent < 100

            conn.start()
            consumer = session.create_consumer(session.queue("filling"))
            for _ in range(sent):
                got = consumer.receive(10)
                assert got is not None and got.body == BODY

            ballast.unlink()
            wait_for_log(broker, ": store limit back to")
            for _ in range(sent + 20):  # more than the lowered limit let in
                producer.send(Message(BODY), persistent=True)
                got = consumer.receive(10)
                assert got is not None and got.body == BODY
        log = broker.log_text()
        assert log.count(": store limit lowered to") == 1
        assert "No space left on device" not in log
        assert "store degraded" not in log
        assert "Traceback" not in log
