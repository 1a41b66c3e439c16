"""A free TCP port on 127.0.0.1, for fixtures that start servers (ours, ActiveMQ, PostgreSQL)."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
