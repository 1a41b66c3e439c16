"""Damaged files cost only the damage, on a real broker process over real files: 2,000
persistent messages stored by STOMP sends with receipts, then bytes flipped in an older
data file, the index truncated or deleted, or the disk filled (a small tmpfs, where this
sandbox lets tests mount one)."""

from __future__ import annotations

import json
import shutil
import signal
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers import BrokerProcess, running_broker
from dovecote.protocol.stomp import Frame
from smalldisk import mounted_tmpfs
from stomplink import Link

COUNT = 2000
QUEUE = "/queue/dmg"
CONFIG = '[store]\nkind = "journal"\njournal_max_file_length = 65536\n'


def call(broker: BrokerProcess, path: str, method: str = "GET") -> tuple[int, Any]:
    url = f"http://127.0.0.1:{broker.console_port}{path}"
    body = b"" if method == "POST" else None
    headers = {"Content-Type": "application/json"}  # a POST is JSON (docs/admin-api.md)
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def size(broker: BrokerProcess) -> int:
    """The queue's size as the admin API gives it (a queue a restart found empty is none)."""
    status, answer = call(broker, "/api/queues/dmg")
    return int(answer["size"]) if status == 200 else 0


def log_lines_with(broker: BrokerProcess, text: str) -> list[str]:
    """The log's lines holding ``text``, once there is one (the log comes on stderr, read
    by another thread than the ready line: polled)."""
    deadline = time.monotonic() + 10
    while not (lines := [line for line in broker.log_text().splitlines() if text in line]):
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{broker.log_text()}"
        time.sleep(0.05)
    return lines


def send(link: Link, body: bytes, receipt: str) -> Frame:
    headers = (("destination", QUEUE), ("persistent", "true"), ("receipt", receipt))
    link.send(Frame("SEND", headers, body))
    return link.read()


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A broker's work directory holding COUNT messages on QUEUE, over many data files."""
    workdir = tmp_path_factory.mktemp("stored")
    with running_broker(CONFIG, workdir=workdir) as broker:
        link = Link(broker.stomp_port)
        for i in range(COUNT):
            assert send(link, b"m%05d-" % i + b"x" * 100, f"r{i}").command == "RECEIPT"
        link.close()
    assert len(list((workdir / "data" / "journal").glob("db-*.log"))) > 3
    return workdir


@pytest.fixture
def workdir(stored: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "broker"
    shutil.copytree(stored, copy)
    return copy


def journal(workdir: Path) -> Path:
    return workdir / "data" / "journal"


def flip_16_bytes(workdir: Path) -> None:
    """Sixteen bytes flipped in one message body in the middle of an older data file."""
    path = journal(workdir) / "db-2.log"
    data = bytearray(path.read_bytes())
    at = data.index(b"x" * 64, len(data) // 2)
    for k in range(16):
        data[at + k] ^= 0xFF
    path.write_bytes(bytes(data))


def take_all(broker: BrokerProcess) -> list[bytes]:
    """Every message the queue holds (they all come before the SUBSCRIBE's receipt); a
    dropped connection raises ConnectionError."""
    link = Link(broker.stomp_port)
    frames = link.take_backlog(QUEUE)
    link.close()
    return [frame.body for frame in frames]


def test_flipped_bytes_in_an_older_data_file_lose_one_message_not_the_queue(
    workdir: Path,
) -> None:
    flip_16_bytes(workdir)
    with running_broker(CONFIG, workdir=workdir) as broker:
        bodies = take_all(broker)  # the connection used to drop after 400, with no ERROR
        assert len(bodies) == COUNT - 1
        assert len(set(bodies)) == COUNT - 1
        lines = log_lines_with(broker, "cannot be read")
        assert len(lines) == 1, lines
        assert "db-2.log" in lines[0] and "1 messages lost (1 of queue://dmg)" in lines[0]
        # New messages go through as before.
        link = Link(broker.stomp_port)
        assert send(link, b"after", "after").command == "RECEIPT"
        link.close()
        assert take_all(broker) == [b"after"]
        assert size(broker) == 0


def test_the_start_check_finds_damage_in_an_older_file_before_serving(workdir: Path) -> None:
    """check_for_corrupt_journal_files (KahaDB's checkForCorruptJournalFiles): the damage
    is reported, with what it cost by destination, at start, not when first read."""
    flip_16_bytes(workdir)
    with running_broker(CONFIG + "check_for_corrupt_journal_files = true\n",
                        workdir=workdir) as broker:  # fmt: skip
        lines = log_lines_with(broker, "cannot be read")
        assert len(lines) == 1, lines
        assert "db-2.log bytes" in lines[0] and "1 messages lost (1 of queue://dmg)" in lines[0]
        assert "journal check: " in broker.log_text()
        assert size(broker) == COUNT - 1  # before anything read the queue
        assert len(take_all(broker)) == COUNT - 1
        assert len(log_lines_with(broker, "cannot be read")) == 1


def test_a_queue_with_a_damaged_record_can_be_purged(workdir: Path) -> None:
    flip_16_bytes(workdir)
    with running_broker(CONFIG, workdir=workdir) as broker:
        assert call(broker, "/api/queues/dmg/purge", "POST") == (200, {"purged": COUNT - 1})
        assert size(broker) == 0
    with running_broker(CONFIG, workdir=workdir) as broker:
        assert size(broker) == 0


def test_a_rebuild_after_a_damaged_record_loses_only_that_record_and_says_so(
    workdir: Path,
) -> None:
    flip_16_bytes(workdir)
    shutil.rmtree(journal(workdir) / "index")
    with running_broker(CONFIG, workdir=workdir) as broker:
        assert size(broker) == COUNT - 1  # was 1,850
        assert len(take_all(broker)) == COUNT - 1
        lines = log_lines_with(broker, "db-2.log bytes")
        assert len(lines) == 1, lines
        assert "lost: 1 messages (1 of queue://dmg)" in lines[0]


@pytest.mark.parametrize("keep", [0.5, 0.0])
def test_a_truncated_index_is_rebuilt_at_start_not_a_sigbus(workdir: Path, keep: float) -> None:
    index_file = journal(workdir) / "index" / "data.mdb"
    with index_file.open("r+b") as f:
        f.truncate(int(index_file.stat().st_size * keep))
    # Before: the broker died of SIGBUS at every start, logging nothing.
    with running_broker(CONFIG, workdir=workdir) as broker:
        assert log_lines_with(broker, "rebuilding it from the journal")
        assert size(broker) == COUNT
        assert len(take_all(broker)) == COUNT


def test_an_index_left_garbled_by_a_crash_is_rebuilt_at_start(workdir: Path) -> None:
    with running_broker(CONFIG, workdir=workdir) as broker:
        broker.process.send_signal(signal.SIGKILL)  # the index is left unsynced, unmarked
        broker.process.wait()
    index_file = journal(workdir) / "index" / "data.mdb"
    data = bytearray(index_file.read_bytes())
    garbled = 0
    for start in range(2 * 4096, len(data), 4096):
        page = data[start : start + 4096]
        flags, lower = struct.unpack_from("<HH", page, 10)
        # A leaf page of message entries whose nodes' value sizes say 4 GiB, as a torn
        # page write can leave them. Every live such page has the pattern (stale copies
        # do too, and do not matter).
        if flags & 0x02 and b"\x9a\xabqueue://dmg" in page:
            for at in range(16, lower, 2):
                node = start + struct.unpack_from("<H", page, at)[0]
                struct.pack_into("<HH", data, node, 0xFFFF, 0xFFFF)
            garbled += 1
    assert garbled
    index_file.write_bytes(bytes(data))
    # Before: the start failed (MDB_CORRUPTED out of recovery) at every try.
    with running_broker(CONFIG, workdir=workdir) as broker:
        assert len(take_all(broker)) == COUNT
        [line] = log_lines_with(broker, "rebuilding it from the journal")
        assert "journal index at" in line and "is damaged" in line


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs (root, or a user namespace that allows mounting, only)."""
    with mounted_tmpfs(tmp_path / "disk", 3) as mount:
        yield mount


def test_queue_counts_stay_exact_after_the_disk_was_full(small_disk: Path, tmp_path: Path) -> None:
    config = f'[broker]\ndata_dir = "{small_disk}/data"\n' + CONFIG
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\1" * (1 << 20))  # taken back once the disk has been full
    receipted = 0
    refused = 0
    workdir = tmp_path / "work"
    workdir.mkdir()
    with running_broker(config, workdir=workdir) as broker:
        link = Link(broker.stomp_port)
        while refused < 20:
            reply = send(link, b"y" * 900, f"r{receipted + refused}")
            if reply.command == "RECEIPT":
                receipted += 1
            else:  # the store could not write: an ERROR, and STOMP closes the connection
                assert "No space left" in reply.body.decode(), reply
                refused += 1
                link = Link(broker.stomp_port)
        ballast.unlink()  # room again: the broker goes on
        for i in range(10):
            assert send(link, b"z" * 900, f"z{i}").command == "RECEIPT"
        receipted += 10
        assert size(broker) == receipted
    with running_broker(config, workdir=workdir) as broker:
        assert size(broker) == receipted  # was three times as many, and stayed so
        taken = 0
        link = Link(broker.stomp_port)
        subscribe = (("destination", QUEUE), ("id", "1"), ("ack", "client-individual"),
                     ("activemq.prefetchSize", "1"))  # fmt: skip
        link.send(Frame("SUBSCRIBE", subscribe))
        acked = 0
        while acked < receipted // 2:  # (the next message may come before an ACK's receipt)
            frame = link.read()
            if frame.command == "RECEIPT":
                acked += 1
            elif taken < receipted // 2:
                assert frame.command == "MESSAGE", frame
                link.send(Frame("ACK", (("id", frame.get("ack") or ""), ("receipt", "a"))))
                taken += 1
        link.send(Frame("UNSUBSCRIBE", (("id", "1"), ("receipt", "gone"))))
        while (frame := link.read()).get("receipt-id") != "gone":
            assert frame.command in ("MESSAGE", "RECEIPT"), frame
        link.close()
        assert size(broker) == receipted - taken
    with running_broker(config, workdir=workdir) as broker:
        assert size(broker) == receipted - taken
        assert len(take_all(broker)) == receipted - taken
        assert "expected in the store were not found" not in broker.log_text()
