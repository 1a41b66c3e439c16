"""STOMP throughput against one dovecote process: a pipelined raw-socket producer and an
auto-ack consumer on the same queue, non-persistent 1 KiB messages.

Run: .venv/bin/python bench/stomp_throughput.py [messages]. A first look only; the side-by-
side comparison with ActiveMQ belongs to the benchmark harness (issue 7).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

BODY = b"x" * 1024


def start_broker() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dovecote", "broker", "--stomp-port", "0", "--openwire-port", "0",
         "--log-level", "warning"],  # fmt: skip
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    ports = dict(part.split("=", 1) for part in line.split()[2:])
    return proc, int(ports["stomp"].rsplit(":", 1)[1])


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
    buf = b""
    while b"\x00" not in buf:
        buf += sock.recv(4096)
    return sock


def consume(port: int, count: int, done: threading.Event, result: list[float]) -> None:
    sock = connect(port)
    sock.sendall(b"SUBSCRIBE\nid:1\ndestination:/queue/bench\nack:auto\n\n\x00")
    seen = 0
    started = 0.0
    while seen < count:
        chunk = sock.recv(1 << 20)
        if not started:
            started = time.monotonic()
        seen += chunk.count(b"MESSAGE\n")
    result.append(time.monotonic())
    done.set()
    sock.close()


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    proc, port = start_broker()
    try:
        done = threading.Event()
        result: list[float] = []
        consumer = threading.Thread(target=consume, args=(port, count, done, result))
        consumer.start()
        time.sleep(0.3)  # let the subscription land before the clock starts (bench only)
        producer = connect(port)
        frame = (
            b"SEND\ndestination:/queue/bench\ncontent-length:1024\n\n" + BODY + b"\x00"
        )
        started = time.monotonic()
        batch = frame * 100
        for _ in range(count // 100):
            producer.sendall(batch)
        done.wait()
        elapsed = result[0] - started
        print(f"{count} messages in {elapsed:.2f}s: {count / elapsed:,.0f} msg/s end to end")
        producer.close()
        consumer.join()
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
