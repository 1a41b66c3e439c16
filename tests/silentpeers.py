"""Sockets that connect and say nothing, and how a test sees the broker close one: for
the tests of listeners' handshake timeouts and connection limits."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def silent_sockets(port: int, n: int) -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        yield socks
    finally:
        for s in socks:
            s.close()


def closed_by_broker(sock: socket.socket, timeout: float) -> bool:
    """Whether the broker closes ``sock`` within ``timeout`` seconds (what it sends
    meanwhile is read and dropped)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:
        pass
    return True
