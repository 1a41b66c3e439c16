"""Ids made as the Java client's IdGenerator makes them, for ``jms.clientIDPrefix`` and
``jms.connectionIDPrefix``: ``<prefix>-<port>-<millis>-<generator>:<sequence>``, the port
one the process could bind (unique among the host's live processes), the generator counted
per process and the sequence per generator (each connection factory has one of each)."""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time

_lock = threading.Lock()
_stub: tuple[int, str] | None = None  # (pid, "-<port>-<millis>-"): made again after a fork
_generators = itertools.count(0)


def _unique_stub() -> str:
    global _stub, _generators
    with _lock:
        if _stub is None or _stub[0] != os.getpid():
            # As IdGenerator's static stub: a free local port and the time; a forked worker
            # makes its own, or its ids would repeat its parent's.
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            _stub = (os.getpid(), f"-{port}-{int(time.time() * 1000)}-")
            _generators = itertools.count(0)
        return _stub[1]


class IdGenerator:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        stub = _unique_stub()
        with _lock:
            self.seed = f"{prefix}{stub}{next(_generators)}:"
        self._sequence = itertools.count(1)
        self._pid = os.getpid()

    def generate(self) -> str:
        if self._pid != os.getpid():  # a factory inherited through a fork
            self.__init__(self.prefix)  # type: ignore[misc]
        return f"{self.seed}{next(self._sequence)}"
