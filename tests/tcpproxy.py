"""A TCP proxy on loopback for tests that watch what passes between a client and a broker.

``TcpProxy(upstream, tap)`` listens on a free port and connects every client it accepts to
``upstream`` (a client whose upstream cannot be reached is closed at once, as a dead broker's
connection would be); ``tap()`` is called once per connection and returns the function that
sees each chunk before it passes, with ``True`` for what the client sent and ``False`` for the
broker's, and returns what to pass on (None: nothing; it may also wait)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from contextlib import suppress

Tap = Callable[[bool, bytes], bytes | None]


class TcpProxy:
    def __init__(self, upstream: int, tap: Callable[[], Tap]) -> None:
        self.upstream = upstream
        self._tap = tap
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._sockets: list[socket.socket] = [self.server]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                broker = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                client.close()
                continue
            self._sockets += [client, broker]
            tap = self._tap()
            for source, sink, from_client in ((client, broker, True), (broker, client, False)):
                threading.Thread(target=self._pipe, args=(source, sink, tap, from_client),
                                 daemon=True).start()  # fmt: skip

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket, tap: Tap, from_client: bool) -> None:
        try:
            while data := source.recv(65536):
                passed = tap(from_client, data)
                if passed is not None:
                    sink.sendall(passed)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        for sock in self._sockets:
            with suppress(OSError):
                sock.close()


class AnswerHolder(TcpProxy):
    """A proxy to one broker port. Once ``hold`` is set, what the broker sends is dropped
    (the client's commands still pass); while ``admit`` is clear, what the client sends
    waits."""

    def __init__(self, upstream: int) -> None:
        self.hold = threading.Event()
        self.admit = threading.Event()
        self.admit.set()
        super().__init__(upstream, lambda: self._pass)

    def _pass(self, from_client: bool, data: bytes) -> bytes | None:
        if from_client:
            self.admit.wait()
            return data
        return None if self.hold.is_set() else data
