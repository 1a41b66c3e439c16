"""The load generator: raw-socket, pipelined STOMP 1.2 producers and consumers, each in its
own process so that the generator is not one Python thread competing with itself.

Producers stamp every frame with a ``ts`` header (nanoseconds, wall clock; all processes
share the machine's clock) and consumers sample it to measure end-to-end latency. Frames are
built once and pipelined in batches: a producer costs a few microseconds per message, far
less than any broker spends on it. Consumers count frames by their NUL terminators (bodies
are ``x`` bytes and headers never hold a NUL) instead of parsing each one, and read the
latency of the last message of each read; that is one sample per socket read, enough for
percentiles and cheap.
"""

from __future__ import annotations

import selectors
import socket
import time
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier, Event
from typing import Any

PIPELINE = 64
"""Frames per socket write for pipelined (asynchronous) sends."""


@dataclass
class ProducerResult:
    sent: int
    started: float
    finished: float
    latencies_ns: list[int] = field(default_factory=list)
    """Receipt round trips for synchronous sends."""


@dataclass
class ConsumerResult:
    received: int
    first: float
    finished: float
    latencies_ns: list[int] = field(default_factory=list)


LOGIN: tuple[str, str] | None = None
"""User and password every connection logs in with (harness.py --secured sets it before
the load's processes are forked)."""

# -- what differs between the peers: only here ----------------------------------------------

PEER = "activemq"
"""The default dialect: dovecote's and ActiveMQ's (they take the same frames)."""
VIRTUAL_HOSTS = {"rabbitmq": "/"}
"""CONNECT's ``host``: RabbitMQ's virtual host (``host:localhost`` gets ``Bad CONNECT``)."""


def virtual_host(peer: str) -> str:
    return VIRTUAL_HOSTS.get(peer, "localhost")


def declaration(peer: str, destination: str, durable: bool) -> str:
    """Header lines every SEND and SUBSCRIBE of ``destination`` carries for ``peer``.
    RabbitMQ declares a ``/queue/`` from the headers of the first frame naming it, and
    refuses a later frame that says otherwise (``PRECONDITION_FAILED``; concurrent
    senders with its defaults collide with ``RESOURCE_LOCKED``): every frame says the same.
    A ``/topic/`` subscription gets RabbitMQ's own private queue, so nothing is added."""
    if peer != "rabbitmq" or not destination.startswith("/queue/"):
        return ""
    return f"durable:{'true' if durable else 'false'}\nauto-delete:false\nexclusive:false\n"


def window(peer: str, size: int) -> str:
    """A subscription's prefetch header (RabbitMQ applies its own to client acks only: with
    ``ack:auto`` it pushes without a limit)."""
    return f"{'prefetch-count' if peer == 'rabbitmq' else 'activemq.prefetchSize'}:{size}\n"


def connect(port: int, client_id: str | None = None, peer: str = PEER) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    extra = f"client-id:{client_id}\n" if client_id else ""
    if LOGIN is not None:
        extra += f"login:{LOGIN[0]}\npasscode:{LOGIN[1]}\n"
    host = virtual_host(peer)
    sock.sendall(f"CONNECT\naccept-version:1.2\nhost:{host}\n{extra}\n\x00".encode())
    read_frame(sock, b"")
    return sock


def read_frame(sock: socket.socket, buf: bytes) -> tuple[bytes, bytes]:
    """One whole frame (up to its NUL) and what followed it."""
    while b"\x00" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    frame, _, rest = buf.partition(b"\x00")
    if frame.lstrip(b"\r\n").startswith(b"ERROR"):
        raise ConnectionError(frame.decode(errors="replace"))
    return frame, rest.lstrip(b"\r\n")


def _send_frame(
    destination: str, body: bytes, persistent: bool, extra: str = "", peer: str = PEER
) -> bytes:
    head = (
        f"SEND\ndestination:{destination}\npersistent:{'true' if persistent else 'false'}\n"
        f"{declaration(peer, destination, persistent)}"
        f"content-length:{len(body)}\n{extra}ts:"
    ).encode()
    return head + b"%d\n\n" + body + b"\x00"


def produce(
    port: int,
    destination: str,
    count: int,
    size: int,
    persistent: bool,
    sync: bool,
    tx_batch: int,
    start: Barrier,
    peer: str = PEER,
) -> ProducerResult:
    """Send ``count`` messages: pipelined (async), one receipt per message (sync), or in
    transactions of ``tx_batch`` committed with a receipt. A queue a persistent send
    declares is durable (RabbitMQ)."""
    sock = connect(port, peer=peer)
    body = b"x" * size
    template = _send_frame(destination, body, persistent, peer=peer)
    buf = b""
    latencies: list[int] = []
    start.wait()
    started = time.monotonic()
    sent = 0
    if tx_batch:
        tx_template = _send_frame(destination, body, persistent, "transaction:t%d\n", peer)
        n = 0
        while sent < count:
            n += 1
            batch = min(tx_batch, count - sent)
            frames = [f"BEGIN\ntransaction:t{n}\n\n\x00".encode()]
            frames += [tx_template % (n, time.time_ns()) for _ in range(batch)]
            frames.append(f"COMMIT\ntransaction:t{n}\nreceipt:c{n}\n\n\x00".encode())
            t0 = time.time_ns()
            sock.sendall(b"".join(frames))
            _, buf = read_frame(sock, buf)
            latencies.append(time.time_ns() - t0)
            sent += batch
    elif sync:
        receipt = template.replace(b"ts:", b"receipt:r\nts:")
        for _ in range(count):
            t0 = time.time_ns()
            sock.sendall(receipt % t0)
            _, buf = read_frame(sock, buf)
            latencies.append(time.time_ns() - t0)
        sent = count
    else:
        while sent < count:
            n = min(PIPELINE, count - sent)
            now = time.time_ns()
            sock.sendall(b"".join([template % now] * n))
            sent += n
        # A last receipt: everything before it has reached the broker.
        sock.sendall(b"DISCONNECT\nreceipt:bye\n\n\x00")
        read_frame(sock, buf)
    finished = time.monotonic()
    sock.close()
    return ProducerResult(sent, started, finished, latencies)


def consume(
    port: int,
    destinations: list[str],
    count_each: int,
    ready: Event,
    prefetch: int = 1000,
    idle_timeout_s: float = 60.0,
    shared: Any = None,
    shared_lock: Any = None,
    peer: str = PEER,
    durable: bool = False,
) -> ConsumerResult:
    """Subscribe (auto ack) once per destination, each on its own connection, and read until
    every subscription has ``count_each`` messages. Topic subscriptions are separate
    connections so fan-out is real. Competing consumers of one queue pass a ``shared``
    counter (a manager Value, with its lock) and ``count_each`` = the total: each stops when
    all of them together have the total, however the broker spread the messages.
    ``durable``: what the queue's senders declared it (RabbitMQ: persistent sends)."""
    selector = selectors.DefaultSelector()
    remaining: dict[socket.socket, int] = {}
    received = 0
    first = 0.0
    for i, destination in enumerate(destinations):
        sock = connect(port, peer=peer)
        sock.sendall(
            f"SUBSCRIBE\nid:{i}\ndestination:{destination}\nack:auto\n"
            f"{declaration(peer, destination, durable)}{window(peer, prefetch)}"
            f"receipt:s{i}\n\n\x00".encode()
        )
        # Messages may come before the receipt (a backlog is dispatched at once), and in
        # the same read as it: count them all.
        early, rest = 0, b""
        while True:
            frame, rest = read_frame(sock, rest)
            if frame.lstrip(b"\r\n").startswith(b"RECEIPT"):
                break
            early += 1
        early += rest.count(b"\x00")
        if early and not first:
            first = time.monotonic()
        received += early
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        remaining[sock] = max(count_each - early, 0)
    if shared is not None and received:
        with shared_lock:
            shared.value += received
    ready.set()
    latencies: list[int] = []
    last = time.monotonic()
    while any(remaining.values()):
        events = selector.select(timeout=0.2)
        now = time.monotonic()
        if not events:
            if now - last > idle_timeout_s:
                break
            if shared is not None:
                with shared_lock:
                    if shared.value >= count_each:
                        break
            continue
        for key, _ in events:
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            chunk = sock.recv(1 << 20)
            if not chunk:
                remaining[sock] = 0
                continue
            if not first:
                first = now
            last = now
            frames = chunk.count(b"\x00")
            received += frames
            if shared is not None:
                with shared_lock:
                    shared.value += frames
                    together = shared.value
                left = max(count_each - together, 0)
                remaining = dict.fromkeys(remaining, left)
            else:
                remaining[sock] = max(remaining[sock] - frames, 0)
            tail = chunk.rfind(b"\nts:")
            if tail >= 0:
                end = chunk.find(b"\n", tail + 4)
                if end > 0:
                    latencies.append(time.time_ns() - int(chunk[tail + 4 : end]))
    finished = time.monotonic()
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]
    return ConsumerResult(received, first, finished, latencies)


def first_message(
    port: int, destination: str, timeout_s: float = 600.0, peer: str = PEER, durable: bool = True
) -> None:
    """Wait for the broker to accept a connection, subscribe (client acks, a window of one,
    so that a broker sends just one message) and return when that first message arrives."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sock = connect(port, peer=peer)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    sock.sendall(
        f"SUBSCRIBE\nid:1\ndestination:{destination}\nack:client\n"
        f"{declaration(peer, destination, durable)}{window(peer, 1)}\n\x00".encode()
    )
    frame, _ = read_frame(sock, b"")
    sock.close()
    if not frame.lstrip(b"\r\n").startswith(b"MESSAGE"):
        raise ConnectionError(f"expected a MESSAGE, got {frame[:40]!r}")
