"""STOMP conformance: bad input gets an ERROR frame naming the problem; a frame that cannot
be read ends its connection, a well-formed one refused does not; every other client goes on
(compatibility P1); heart-beats both ways."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable

import pytest

from brokers import BrokerProcess
from rawstomp import RawStomp
from stompclient import Client

Connect = Callable[..., Client]


@pytest.fixture
def raw(broker: BrokerProcess) -> Callable[[], RawStomp]:
    opened: list[RawStomp] = []

    def make() -> RawStomp:
        client = RawStomp(broker.stomp_address)
        opened.append(client)
        return client

    yield make  # type: ignore[misc]
    for client in opened:
        client.close()


def _error_then_close(client: RawStomp) -> dict[str, str]:
    command, headers, _ = client.read_frame()
    assert command == "ERROR"
    assert client.closed_by_peer()
    return headers


@pytest.mark.parametrize(
    ("frames", "words", "closes"),
    [
        # Frames that cannot be read, or a command there is none of: the connection ends.
        (b"BOGUS\n\n\x00", "BOGUS", True),
        (b"SEND\ndestination:/queue/x\nbad header line\n\n\x00", "header", True),
        (b"SEND\ndestination:/queue/x\ncontent-length:-4\n\n\x00", "content-length", True),
        (b"SEND\ndestination:/queue/x\nbad:esc\\qape\n\n\x00", "escape", True),
        # Well-formed frames refused: an ERROR, and the connection goes on (as ActiveMQ's).
        (b"SEND\n\nno destination\x00", "destination", False),
        (b"ACK\nid:ID:nope\n\n\x00", "ID:nope", False),
        (b"COMMIT\ntransaction:never\n\n\x00", "never", False),
        (b"SEND\ndestination:/queue/x\ntransaction:ghost\n\n\x00", "ghost", False),
        (b"UNSUBSCRIBE\nid:missing\n\n\x00", "missing", False),
        (b"SUBSCRIBE\ndestination:/queue/x\nid:1\nack:sometimes\n\n\x00", "sometimes", False),
        (b"SEND\ndestination:/queue/x\npriority:high\n\n\x00", "priority", False),
        (b"SUBSCRIBE\ndestination:/queue/x\nid:2\nselector:a = = 1\n\n\x00", "selector", False),
    ],
)
def test_bad_frames_get_an_error_naming_the_problem(
    raw: Callable[[], RawStomp],
    connect: Connect,
    name: str,
    frames: bytes,
    words: str,
    closes: bool,
) -> None:
    bystander = connect()
    bystander.subscribe(f"/queue/{name}")
    client = raw()
    client.connect()
    client.send(frames)
    if closes:
        headers = _error_then_close(client)
    else:
        command, headers, _ = client.read_frame()
        assert command == "ERROR"
        # The same connection goes on: a send with a receipt is answered, and a refused
        # subscription's id is free again.
        own = f"/queue/own.{uuid.uuid4().hex}"
        client.send(f"SUBSCRIBE\ndestination:{own}\nid:2\n\n\x00".encode())
        client.send(f"SEND\ndestination:{own}\nreceipt:r\n\nok\x00".encode())
        answers = [client.read_frame() for _ in range(2)]
        assert sorted(command for command, _, _ in answers) == ["MESSAGE", "RECEIPT"], answers
    assert words.lower() in headers["message"].lower()
    # Everyone else is unaffected.
    bystander.send(f"/queue/{name}", "still here")
    assert bystander.receive().body == "still here"


def test_a_destination_without_a_prefix_is_a_queue_of_that_name(
    connect: Connect, name: str
) -> None:
    """As ActiveMQ's STOMP falls back to: ``SEND destination:orders`` is /queue/orders."""
    client = connect()
    client.subscribe(f"/queue/{name}")
    client.send(name, "bare")
    assert client.receive().body == "bare"


def test_an_error_reaches_a_client_that_is_still_sending(raw: Callable[[], RawStomp]) -> None:
    """A client still flooding sends behind a bad frame reads the ERROR, then the close:
    the broker closes with input unread, and the reset that brings the client must not
    take the frame that says why."""
    client = raw()
    client.connect()
    flood = (b"SEND\ndestination:/queue/flood\n\n" + b"x" * 1024 + b"\x00") * 4096

    def send_all() -> None:
        with contextlib.suppress(OSError):
            client.send(b"BOGUS\n\n\x00" + flood)  # 4 MiB behind the bad frame

    sender = threading.Thread(target=send_all)
    sender.start()
    try:
        command, headers, _ = client.read_frame()
        assert command == "ERROR" and "BOGUS" in headers["message"]
        assert client.closed_by_peer()
    finally:
        sender.join(timeout=20)


def test_frame_before_connect_is_an_error(raw: Callable[[], RawStomp]) -> None:
    client = raw()
    client.send(b"SEND\ndestination:/queue/x\n\nhi\x00")
    assert "CONNECT" in _error_then_close(client)["message"]


def test_no_common_version_is_refused(raw: Callable[[], RawStomp]) -> None:
    client = raw()
    client.send(b"CONNECT\naccept-version:2.0\nhost:x\n\n\x00")
    headers = _error_then_close(client)
    assert headers["version"] == "1.0,1.1,1.2"


def test_oversized_frame_is_refused(
    raw: Callable[[], RawStomp], connect: Connect, name: str
) -> None:
    client = raw()
    client.connect()
    client.send(b"SEND\ndestination:/queue/big\n\n" + b"x" * (1024 * 1024 + 10) + b"\x00")
    assert "exceeds" in _error_then_close(client)["message"]
    other = connect()
    other.subscribe(f"/queue/{name}")
    other.send(f"/queue/{name}", "fine")
    assert other.receive().body == "fine"


def test_error_frame_carries_the_receipt_id(raw: Callable[[], RawStomp]) -> None:
    client = raw()
    client.connect()
    client.send(b"COMMIT\ntransaction:none\nreceipt:77\n\n\x00")
    command, headers, _ = client.read_frame()
    assert command == "ERROR" and headers["receipt-id"] == "77"


def test_duplicate_client_id_is_refused(connect: Connect, name: str) -> None:
    connect(client_id=f"dup-{name}")
    with pytest.raises(Exception):  # noqa: B017 - stomp.py raises its own ConnectFailedException
        connect(client_id=f"dup-{name}")


def test_silent_client_is_dropped_after_the_heartbeat_interval(
    raw: Callable[[], RawStomp],
) -> None:
    client = raw()
    # We promise a beat every 300 ms; the broker (200 ms) settles on 300 and allows 1.5x.
    headers = client.connect(heart_beat="300,0")
    assert headers["heart-beat"].split(",")[1] == "300"
    started = time.monotonic()
    assert client.closed_by_peer()
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < 5, elapsed


def test_heartbeating_client_stays_and_broker_beats_too(raw: Callable[[], RawStomp]) -> None:
    client = raw()
    headers = client.connect(heart_beat="300,300")
    assert headers["heart-beat"] == "300,300"
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.1):
            client.send(b"\n")

    beater = threading.Thread(target=beat, daemon=True)
    beater.start()
    try:
        received = b""
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            received += client.sock.recv(100)
        # The broker sent EOL heart-beats and did not drop us in 1.5 s (5 of its intervals).
        assert received.count(b"\n") >= 2
        client.send(b"BEGIN\ntransaction:t\nreceipt:alive\n\n\x00")
        command, hdrs, _ = client.read_frame()
        assert (command, hdrs.get("receipt-id")) == ("RECEIPT", "alive")
    finally:
        stop.set()
        beater.join()


def test_garbage_over_real_sockets_never_hurts_other_clients(
    raw: Callable[[], RawStomp], connect: Connect, name: str
) -> None:
    """Random and mutated bytes after CONNECT, then EOF: the broker closes each connection
    (after an ERROR where the bytes broke the protocol) and keeps serving a bystander."""
    rng = random.Random(1234)
    bystander = connect()
    bystander.subscribe(f"/queue/{name}")
    valid = b"SEND\ndestination:/queue/fuzz\ncontent-length:5\n\nhello\x00"
    for round_no in range(30):
        client = raw()
        client.connect()
        if round_no % 2:
            payload = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        else:
            mutated = bytearray(valid * 3)
            for _ in range(rng.randrange(1, 6)):
                mutated[rng.randrange(len(mutated))] = rng.choice([0, 10, 58, 92, 255])
            payload = bytes(mutated)
        client.send(payload + b"\x00\n")
        client.sock.shutdown(socket.SHUT_WR)
        # The broker answers with an ERROR, or with nothing, then closes: never hangs.
        assert client.closed_by_peer()
        client.close()
        bystander.send(f"/queue/{name}", f"alive {round_no}")
        assert bystander.receive().body == f"alive {round_no}"
