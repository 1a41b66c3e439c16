"""The store cursor over the journal (issue 7): past a queue's memory mark its persistent
backlog is held by the store only and paged back in, in send order, a window at a time, live
and after a restart; counting, browsing and purging such a backlog reach into the store."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

from brokers import BrokerProcess, running_broker
from dovecote.protocol.stomp import Frame
from stomplink import Link

LIMIT = 262144
CONFIG = (
    f'[store]\nkind = "journal"\n[usage]\nmemory_limit = {LIMIT}\nsend_fail_if_no_space = true\n'
)
BODY = b"x" * 2048


def api(broker: BrokerProcess, path: str, method: str = "GET") -> Any:
    url = f"http://127.0.0.1:{broker.console_port}{path}"
    headers = {"Content-Type": "application/json"}  # a POST is JSON (docs/admin-api.md)
    request = urllib.request.Request(url, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def send_numbered(port: int, first: int, count: int) -> None:
    link = Link(port)
    for n in range(first, first + count):
        link.send(Frame("SEND", (("destination", "/queue/backlog"), ("persistent", "true"),
                                 ("n", str(n)), ("receipt", f"r{n}")), BODY))  # fmt: skip
        reply = link.read()
        assert reply.command == "RECEIPT", reply.get("message")
    link.close()


def numbers(frames: list[Frame]) -> list[int]:
    return [int(f.get("n") or -1) for f in frames]


def test_a_live_backlog_keeps_send_order_while_producers_and_consumers_overlap(
    tmp_path: Path,
) -> None:
    with running_broker(CONFIG, workdir=tmp_path) as broker:
        send_numbered(broker.stomp_port, 0, 600)  # 1.2 MB: all but the first ~90 in the store
        assert api(broker, "/api/broker")["memoryUsage"] <= LIMIT
        assert api(broker, "/api/queues/backlog")["size"] == 600
        late = threading.Thread(target=send_numbered, args=(broker.stomp_port, 600, 600))
        late.start()  # sends while the backlog is paged in: they must wait behind it
        consumer = Link(broker.stomp_port)
        consumer.send(Frame("SUBSCRIBE", (("destination", "/queue/backlog"), ("id", "1"),
                                         ("ack", "client-individual"),
                                         ("activemq.prefetchSize", "50"))))  # fmt: skip
        received: list[Frame] = []
        while len(received) < 1200:
            frame = consumer.read()
            assert frame.command == "MESSAGE", frame
            received.append(frame)
            consumer.send(Frame("ACK", (("id", frame.get("ack") or ""),)))
        late.join()
        assert numbers(received) == list(range(1200))
        assert all(f.body == BODY for f in received)


def test_a_restarted_backlog_is_counted_browsed_and_purged_from_the_store(
    tmp_path: Path,
) -> None:
    with running_broker(CONFIG, workdir=tmp_path) as broker:
        send_numbered(broker.stomp_port, 0, 1500)
    with running_broker(CONFIG, workdir=tmp_path) as broker:
        totals = api(broker, "/api/broker")
        assert totals["memoryUsage"] == 0  # counted from the index, nothing read yet
        assert totals["storeUsage"] >= 1500 * len(BODY)
        assert api(broker, "/api/queues/backlog")["size"] == 1500
        browsed = api(broker, "/api/queues/backlog/messages?limit=1000")
        assert [int(m["properties"]["n"]) for m in browsed] == list(range(1000))
        # A consumer takes a few and leaves them unacknowledged: they come back first.
        taker = Link(broker.stomp_port)
        taker.send(Frame("SUBSCRIBE", (("destination", "/queue/backlog"), ("id", "1"),
                                      ("ack", "client-individual"),
                                      ("activemq.prefetchSize", "5"))))  # fmt: skip
        assert numbers([taker.read() for _ in range(5)]) == [0, 1, 2, 3, 4]
        taker.send(Frame("UNSUBSCRIBE", (("id", "1"), ("receipt", "gone"))))
        taker.until_receipt()
        assert api(broker, "/api/queues/backlog/purge", "POST") == {"purged": 1500}
        assert api(broker, "/api/queues/backlog")["size"] == 0
        assert api(broker, "/api/broker")["storeUsage"] == 0
    with running_broker(CONFIG, workdir=tmp_path) as broker:
        assert Link(broker.stomp_port).take_backlog("/queue/backlog") == []


def heap_mib(broker: BrokerProcess) -> float:
    """The broker's own memory (RssAnon): not the index pages a start reads, which are
    the kernel's file cache mapped in (the duplicate check's rebuild reads every message
    id key of the index: 13 MiB of mapped pages for these 50,000, given back on demand)."""
    for line in Path(f"/proc/{broker.process.pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no RssAnon")


def test_a_restart_reads_each_queues_count_not_its_messages(tmp_path: Path) -> None:
    """Restarting with a long backlog costs no memory per message (each message used to get
    a header object at start: ~30 MiB for these 50,000)."""
    total = 50_000
    with running_broker('[store]\nkind = "journal"\n', workdir=tmp_path) as broker:
        api(broker, "/api/broker")  # the console's modules load at its first request
        empty = heap_mib(broker)
        link = Link(broker.stomp_port)
        for n in range(total):  # pipelined; one receipt at the end covers all before it
            headers = [("destination", "/queue/long"), ("persistent", "true")]
            if n == total - 1:
                headers.append(("receipt", "last"))
            link.send(Frame("SEND", tuple(headers), b"m%06d" % n))
        assert link.until_receipt().get("receipt-id") == "last"
    with running_broker('[store]\nkind = "journal"\n', workdir=tmp_path) as broker:
        assert api(broker, "/api/queues/long")["size"] == total
        assert heap_mib(broker) - empty < 8  # measured: 1.6 MiB
        first = Link(broker.stomp_port)
        first.send(Frame("SUBSCRIBE", (("destination", "/queue/long"), ("id", "1"),
                                      ("ack", "client-individual"),
                                      ("activemq.prefetchSize", "3"))))  # fmt: skip
        assert [first.read().body for _ in range(3)] == [b"m000000", b"m000001", b"m000002"]
