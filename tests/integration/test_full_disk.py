"""A full disk (issue: hardening): the store limit is cut to what the disk can hold at start,
producers meet the limit instead of the disk's end, and when the disk fills all the same a
send gets an error naming the problem while the broker serves on and loses nothing.

The broker runs on a small tmpfs mounted for the test (root only: skipped elsewhere)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers import running_broker
from dovecote.client import ConnectionFactory, JMSError, Message
from smalldisk import mounted_tmpfs
from stompclient import Client

DISK_MIB = 24
BODY = "x" * 100_000


def console(broker: object, path: str) -> bytes:
    port = broker.console_port  # type: ignore[attr-defined]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
        return answer.read()  # type: ignore[no-any-return]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "disk", DISK_MIB) as mount:
        yield mount


def test_the_store_limit_is_cut_to_the_disk_and_producers_meet_it(small_disk: Path) -> None:
    config = "[usage]\nsend_fail_if_no_space = true\n"
    with running_broker(config, workdir=small_disk) as broker:
        assert "store limit of 102400 MiB is more than" in broker.log_text()
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with ConnectionFactory(url).create_connection() as conn:
            session = conn.create_session()
            producer = session.create_producer(session.queue("full"))
            sent = 0
            with pytest.raises(JMSError) as refused:
                for _ in range(DISK_MIB * 10 + 10):
                    producer.send(Message(BODY), persistent=True)
                    sent += 1
            assert "store limit" in str(refused.value), refused.value
            # The same connection consumes what was stored, and the room comes back.
            conn.start()
            consumer = session.create_consumer(session.queue("full"))
            for _ in range(sent):
                got = consumer.receive(10)
                assert got is not None and got.body == BODY
            producer.send(Message("after"), persistent=True)
            got = consumer.receive(10)
            assert got is not None and got.body == "after"
        assert "Traceback" not in broker.log_text()


# The disk is filled faster than the limits' re-check (test_disk_fills_while_running.py)
# would notice: here it is off, and the disk's end is met.
NO_CHECK = "[usage]\ndisk_check_period_ms = 0\n"
STORES = {
    "journal": (NO_CHECK, "No space left on device"),
    "sqlite": (NO_CHECK + '[store]\nkind = "sql"\n', "database or disk is full"),
}


@pytest.mark.parametrize("store", sorted(STORES))
def test_a_full_disk_fails_the_send_with_its_reason_and_serves_on(
    small_disk: Path, store: str
) -> None:
    config, reason = STORES[store]
    with running_broker(config, workdir=small_disk) as broker:
        # Filled after the start: the limit was cut to an emptier disk.
        ballast = small_disk / "ballast"
        free = subprocess.run(
            ["df", "--output=avail", "-B1", str(small_disk)], capture_output=True, text=True,
            check=True,
        ).stdout.split()[-1]  # fmt: skip
        with ballast.open("wb") as f:
            f.write(b"\0" * max(0, int(free) - 3 * 1024 * 1024))
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        stored: list[str] = []
        with ConnectionFactory(url).create_connection() as conn:
            session = conn.create_session()
            producer = session.create_producer(session.queue("disk"))
            with pytest.raises(JMSError) as refused:
                for i in range(100):
                    producer.send(Message(f"{i}:{BODY}"), persistent=True)
                    stored.append(f"{i}:{BODY}")
            assert reason in str(refused.value), refused.value
            assert 0 < len(stored) < 100
            # A STOMP client meanwhile: its refused send gets an ERROR saying why.
            with Client(broker.stomp_address) as stomp:
                stomp.conn.send("/queue/disk", BODY, headers={"persistent": "true", "receipt": "r"})
                error = stomp.listener.errors.get(timeout=10)
                assert reason in error.headers.get("message", ""), error
            # The admin API and the metrics say so.
            assert reason in json.loads(console(broker, "/api/broker"))["storeDegraded"]
            assert b"dovecote_store_degraded 1.0" in console(broker, "/metrics")
            # The OpenWire connection goes on: its messages are there, and once the disk has
            # room again its sends are stored.
            conn.start()
            consumer = session.create_consumer(session.queue("disk"))
            got = consumer.receive(10)
            assert got is not None and got.body == stored[0]
            ballast.unlink()
            producer.send(Message("after"), persistent=True)
            stored.append("after")
            # The mode ends once the store's probe agrees writes work again (the SQL store's
            # checks a send-sized row, right after a stored send or every 2 s): polled.
            deadline = time.monotonic() + 10
            while json.loads(console(broker, "/api/broker"))["storeDegraded"] is not None:
                assert time.monotonic() < deadline, "still degraded 10 s after a stored send"
                time.sleep(0.1)
            assert b"dovecote_store_degraded 0.0" in console(broker, "/metrics")
        # Logged before the mode ends, but read from the broker's stderr by a thread that a
        # loaded machine may hold up: polled.
        deadline = time.monotonic() + 10
        while "leaving degraded mode" not in broker.log_text():
            assert time.monotonic() < deadline, broker.log_text()
            time.sleep(0.05)
        log = broker.log_text()
        assert log.count(f"store degraded: the store could not write: {reason}") == 1, log
        assert log.count("leaving degraded mode") == 1, log  # once a send was stored
        assert "Traceback" not in log
    # Everything whose send returned is there after a restart; the first was consumed while
    # the disk was full, and its ack (nobody waits for it) may have been refused: at least
    # once, it may come back.
    with running_broker(config, workdir=small_disk) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with ConnectionFactory(url).create_connection() as conn:
            conn.start()
            session = conn.create_session()
            consumer = session.create_consumer(session.queue("disk"))
            bodies = []
            while (message := consumer.receive(2)) is not None:
                bodies.append(message.body)
            assert bodies in (stored, stored[1:]), [b[:8] for b in bodies]
