"""systemUsage and producer flow control over real processes (compatibility M6, S4): a fast producer
and a slow consumer keep the broker's memory bounded and lose nothing; sendFailIfNoSpace
turns the wait into an error; without flow control, non-persistent messages spill to the
temp store on disk, which a restart wipes."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from brokers import BrokerProcess, running_broker
from dovecote.protocol.stomp import Frame
from stomplink import Link

BODY = b"x" * 2048


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def send(link: Link, destination: str, body: bytes, receipt: str, **headers: str) -> Frame:
    hdrs = (("destination", destination), ("receipt", receipt), *headers.items())
    link.send(Frame("SEND", hdrs, body))
    return link.read()


def wait_for_log(broker: BrokerProcess, text: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while text not in broker.log_text():
        assert time.monotonic() < deadline, f"broker never logged {text!r}"
        time.sleep(0.02)


def test_fast_producer_slow_consumer_memory_bounded_nothing_lost(tmp_path: Path) -> None:
    limit = 4 * 1024 * 1024
    total = 30_000
    with running_broker(f"[usage]\nmemory_limit = {limit}\n", workdir=tmp_path) as broker:
        pid = broker.process.pid
        baseline = rss_bytes(pid)
        peak = [baseline]
        sent = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.02):
                peak[0] = max(peak[0], rss_bytes(pid))

        def produce() -> None:
            link = Link(broker.stomp_port)
            for i in range(total):
                reply = send(link, "/queue/flow", BODY, f"r{i}", seq=str(i))
                assert reply.command == "RECEIPT"
                sent[0] += 1
            link.close()

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        producer = threading.Thread(target=produce)
        producer.start()
        wait_for_log(broker, "producer flow control")
        blocked_at = sent[0]
        # The producer is held near the limit: far fewer messages than it wants to send.
        assert blocked_at * len(BODY) <= limit * 1.5
        assert blocked_at < total // 2

        consumer = Link(broker.stomp_port)
        consumer.send(Frame("SUBSCRIBE", (("destination", "/queue/flow"), ("id", "1"),
                                         ("ack", "client-individual"),
                                         ("activemq.prefetchSize", "50"))))  # fmt: skip
        seen: list[int] = []
        while len(seen) < total:
            frame = consumer.read()
            assert frame.command == "MESSAGE"
            seen.append(int(frame.get("seq") or -1))
            consumer.send(Frame("ACK", (("id", frame.get("ack") or ""),)))
        producer.join(30)
        done.set()
        assert sorted(seen) == list(range(total))
        # 30,000 x 2 KiB went through (about 75 MiB of RSS growth without a limit); the
        # broker held only about its 4 MiB limit at a time.
        print(f"RSS growth {(peak[0] - baseline) / 2**20:.1f} MiB")
        assert peak[0] - baseline < 40 * 1024 * 1024, (baseline, peak[0])


def test_send_fail_if_no_space_is_a_clear_error_and_loses_nothing(tmp_path: Path) -> None:
    # Persistent messages stay in memory only with the vm cursor (as in ActiveMQ).
    config = (
        "[usage]\nmemory_limit = 65536\nsend_fail_if_no_space = true\n"
        '[[policy.entries]]\npending_queue_cursor = "vm"\n'
    )
    with running_broker(config, workdir=tmp_path) as broker:
        link = Link(broker.stomp_port)
        accepted = 0
        while True:
            reply = send(link, "/queue/full", BODY, f"r{accepted}", persistent="true")
            if reply.command == "ERROR":
                break
            accepted += 1
            assert accepted < 1000, "the limit never applied"
        assert "limit" in (reply.get("message") or "")
        assert "queue://full" in (reply.get("message") or "")
        got = Link(broker.stomp_port).take_backlog("/queue/full")
        assert len(got) == accepted


def test_without_flow_control_non_persistent_messages_spill_to_disk(tmp_path: Path) -> None:
    config = (
        "[usage]\nmemory_limit = 262144\n"
        '[[policy.entries]]\npattern = "spill.>"\nproducer_flow_control = false\n'
    )
    spill = tmp_path / "data" / "tmp_storage" / "spill.dat"
    with running_broker(config, workdir=tmp_path) as broker:
        link = Link(broker.stomp_port)
        for i in range(1000):
            body = f"{i:06d}".encode() + BODY
            assert send(link, "/queue/spill.a", body, f"r{i}").command == "RECEIPT"
        assert spill.stat().st_size > 1024 * 1024  # most of the 2 MB went to disk
        bodies = [m.body for m in Link(broker.stomp_port).take_backlog("/queue/spill.a")]
        assert bodies == [f"{i:06d}".encode() + BODY for i in range(1000)]
        assert spill.stat().st_size == 0  # nothing live is left in the temp store
        for i in range(300):
            send(link, "/queue/spill.b", BODY, f"s{i}")
        assert spill.stat().st_size > 0
    with running_broker(config, workdir=tmp_path) as broker:
        assert spill.stat().st_size == 0  # wiped at start: non-persistent messages are gone
        assert Link(broker.stomp_port).take_backlog("/queue/spill.b") == []


@pytest.mark.parametrize("store", ["journal", "sql"])
def test_store_cursor_keeps_a_persistent_backlog_out_of_memory(tmp_path: Path, store: str) -> None:
    """ActiveMQ's default store cursor: a persistent backlog many times the memory limit is
    accepted (a send the limit held back would be an ERROR here), kept in order through a
    restart, and delivered whole; only the vm cursor holds producers at the limit. The
    journal reads such messages back itself; the SQL store's wait in the temp store."""
    config = (
        f'[store]\nkind = "{store}"\n[usage]\nmemory_limit = 262144\nsend_fail_if_no_space = true\n'
    )
    spill = tmp_path / "data" / "tmp_storage" / "spill.dat"
    total = 1000  # 2 MB of bodies: 8 times the limit
    with running_broker(config, workdir=tmp_path) as broker:
        link = Link(broker.stomp_port)
        for i in range(total):
            body = f"{i:06d}".encode() + BODY
            reply = send(link, "/queue/backlog", body, f"r{i}", persistent="true")
            assert reply.command == "RECEIPT", reply.get("message")
        url = f"http://127.0.0.1:{broker.console_port}/api/broker"
        with urllib.request.urlopen(url, timeout=10) as response:
            usage = json.loads(response.read())
        assert usage["memoryUsage"] <= 262144  # what is past 70% waits out of memory...
        assert usage["storeUsage"] >= total * len(BODY)  # ...weighing on the store only
        if store == "journal":
            assert spill.stat().st_size == 0  # read back from the journal, not copied aside
        else:
            assert spill.stat().st_size > 1024 * 1024
    with running_broker(config, workdir=tmp_path) as broker:
        consumer = Link(broker.stomp_port)
        consumer.send(Frame("SUBSCRIBE", (("destination", "/queue/backlog"), ("id", "1"),
                                         ("ack", "client-individual"),
                                         ("activemq.prefetchSize", "20"))))  # fmt: skip
        bodies = []
        while len(bodies) < total:
            frame = consumer.read()
            assert frame.command == "MESSAGE"
            bodies.append(frame.body)
            consumer.send(Frame("ACK", (("id", frame.get("ack") or ""),)))
        assert bodies == [f"{i:06d}".encode() + BODY for i in range(total)]


def test_destination_memory_limit_applies_to_that_destination_only(tmp_path: Path) -> None:
    config = (
        "[usage]\nsend_fail_if_no_space = true\n"
        '[[policy.entries]]\npattern = "small.>"\nmemory_limit = 65536\n'
    )
    with running_broker(config, workdir=tmp_path) as broker:
        small, other = Link(broker.stomp_port), Link(broker.stomp_port)
        accepted = 0
        while (reply := send(small, "/queue/small.a", BODY, f"s{accepted}")).command == "RECEIPT":
            accepted += 1
            assert accepted < 1000, "the destination limit never applied"
        assert "queue://small.a memory limit" in (reply.get("message") or "")
        assert 10 < accepted < 40  # about 64 KiB of 2 KiB messages
        for i in range(200):  # another destination still has the broker's room
            assert send(other, "/queue/other", BODY, f"o{i}").command == "RECEIPT"


def test_temp_store_limit_applies_to_spilled_messages(tmp_path: Path) -> None:
    config = (
        "[usage]\nmemory_limit = 65536\ntemp_limit = 262144\nsend_fail_if_no_space = true\n"
        '[[policy.entries]]\npattern = "spill.>"\nproducer_flow_control = false\n'
    )
    with running_broker(config, workdir=tmp_path) as broker:
        link = Link(broker.stomp_port)
        accepted = 0
        while (reply := send(link, "/queue/spill.t", BODY, f"t{accepted}")).command == "RECEIPT":
            accepted += 1
            assert accepted < 1000, "the temp limit never applied"
        assert "temp store limit" in (reply.get("message") or "")
        consumer = Link(broker.stomp_port)
        consumer.send(Frame("SUBSCRIBE", (("destination", "/queue/spill.t"), ("id", "1"),
                                         ("receipt", "sub"))))  # fmt: skip
        assert consumer.until_receipt().get("receipt-id") == "sub"  # answered, then sent
        got = 0
        while got < accepted and consumer.read().command == "MESSAGE":
            got += 1
        assert got == accepted


def test_an_auto_ack_subscriber_that_does_not_read_holds_the_dispatch_back(
    tmp_path: Path,
) -> None:
    """ack:auto settles on dispatch, so no acks limit what is sent; what bounds it is the
    socket: once the reader stops, the broker stops dispatching (about its window plus
    what the socket buffers hold) instead of moving the whole backlog into its own write
    buffer. Reading again brings the rest, in order."""
    body = b"y" * 16384
    total = 1500  # 24 MiB: more than the socket buffers hold
    with running_broker(workdir=tmp_path) as broker:
        producer = Link(broker.stomp_port)
        for i in range(total):
            producer.send(
                Frame("SEND", (("destination", "/queue/unread"),), f"{i:05d}".encode() + body)
            )
        producer.send(Frame("SUBSCRIBE", (("destination", "/queue/other"), ("id", "x"),
                                          ("receipt", "sent"))))  # fmt: skip
        producer.until_receipt()
        reader = Link(broker.stomp_port)
        reader.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        window = ("activemq.prefetchSize", "50")
        reader.send(Frame("SUBSCRIBE", (("destination", "/queue/unread"), ("id", "1"),
                                        ("ack", "auto"), window)))  # fmt: skip
        url = f"http://127.0.0.1:{broker.console_port}/api/queues/unread"
        dequeued, steady = -1, 0
        deadline = time.monotonic() + 20
        while steady < 10:
            assert time.monotonic() < deadline, "the dispatch never came to rest"
            with urllib.request.urlopen(url, timeout=10) as response:
                now = json.loads(response.read())["dequeued"]
            steady = steady + 1 if now == dequeued and now > 0 else 0
            dequeued = now
            time.sleep(0.05)
        assert dequeued < total // 2, (
            f"{dequeued} of {total} dispatched to a reader that reads nothing"
        )
        got = [reader.read() for _ in range(total)]
        assert [m.body[:5] for m in got] == [f"{i:05d}".encode() for i in range(total)]


def test_a_topic_message_weighs_on_memory_once_per_subscriber_until_each_has_it(
    tmp_path: Path,
) -> None:
    """Each subscriber's copy of a non-persistent topic message is counted in memory while
    it waits or is unacknowledged (the copies are charged together) and given back as each
    is acked: with three subscribers, three times the bodies, and nothing once all ack."""
    count = 20
    with running_broker("", workdir=tmp_path) as broker:
        url = f"http://127.0.0.1:{broker.console_port}/api/broker"

        def memory_usage() -> int:
            with urllib.request.urlopen(url, timeout=10) as response:
                return int(json.loads(response.read())["memoryUsage"])

        subscribers = []
        for n in range(3):
            link = Link(broker.stomp_port)
            headers = (("destination", "/topic/weigh"), ("id", str(n)), ("receipt", "s"))
            link.send(Frame("SUBSCRIBE", (*headers, ("ack", "client-individual"))))
            assert link.read().command == "RECEIPT"
            subscribers.append(link)
        producer = Link(broker.stomp_port)
        for i in range(count):
            assert send(producer, "/topic/weigh", BODY, f"r{i}").command == "RECEIPT"
        held = memory_usage()
        assert 3 * count * len(BODY) <= held < 3 * count * (len(BODY) + 1024)
        first = subscribers[0]
        for _ in range(count):
            frame = first.read()
            first.send(Frame("ACK", (("id", frame.get("ack") or ""),)))
        deadline = time.monotonic() + 10
        while memory_usage() > held * 2 // 3:
            assert time.monotonic() < deadline, "the first subscriber's acks gave nothing back"
            time.sleep(0.02)
        assert memory_usage() == held * 2 // 3
        for link in subscribers[1:]:
            for _ in range(count):
                frame = link.read()
                link.send(Frame("ACK", (("id", frame.get("ack") or ""),)))
        while memory_usage() > 0:
            assert time.monotonic() < deadline, "memory was not given back"
            time.sleep(0.02)
        assert memory_usage() == 0
