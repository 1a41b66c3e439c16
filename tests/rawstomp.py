"""A bare socket speaking STOMP by hand, for frames no client library would send."""

from __future__ import annotations

import re
import socket


def _unescape(line: str) -> str:
    """Undo STOMP 1.2 escaping in a header value."""
    name, _, value = line.partition(":")
    table = {"n": "\n", "r": "\r", "c": ":", "\\": "\\"}
    unescaped = re.sub(r"\\(.)", lambda m: table.get(m.group(1), m.group(0)), value)
    return f"{name}:{unescaped}"


class RawStomp:
    """A bare socket speaking STOMP by hand, for frames no client library would send."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=10)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def connect(self, heart_beat: str = "0,0") -> dict[str, str]:
        self.send(f"CONNECT\naccept-version:1.2\nhost:x\nheart-beat:{heart_beat}\n\n\x00".encode())
        command, headers, _ = self.read_frame()
        assert command == "CONNECTED", command
        return headers

    def read_frame(self) -> tuple[str, dict[str, str], bytes]:
        while True:
            stripped = self.buffer.lstrip(b"\r\n")
            end = stripped.find(b"\x00")
            if end >= 0:
                raw, self.buffer = stripped[:end], stripped[end + 1 :]
                head, _, body = raw.partition(b"\n\n")
                lines = head.decode().split("\n")
                headers = dict(_unescape(line).split(":", 1) for line in lines[1:] if line)
                return lines[0], headers, body
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk

    def closed_by_peer(self) -> bool:
        """Read until the broker closes the socket (True) or the socket times out."""
        try:
            while self.sock.recv(65536):
                pass
        except TimeoutError:
            return False
        except ConnectionError:
            return True
        return True

    def close(self) -> None:
        self.sock.close()
