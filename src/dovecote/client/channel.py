"""The consumer's unconsumed messages, handed out only while the connection is started."""

from __future__ import annotations

import threading
import time
from collections import deque

from dovecote.protocol.openwire import Structure


class Empty(Exception):
    """Nothing to hand out before the timeout."""


class DispatchChannel:
    """The consumer's unconsumed messages (Java's MessageDispatchChannel): handed out only
    while started. ``put(None)`` wakes a waiting reader at once, started or not (the
    connection failed or closed)."""

    def __init__(self) -> None:
        self._items: deque[Structure | None] = deque()
        self._changed = threading.Condition()
        self.running = False
        self.closed = False

    def put(self, item: Structure | None) -> None:
        with self._changed:
            self._items.append(item)
            self._changed.notify_all()

    def put_first(self, items: list[Structure]) -> None:
        with self._changed:
            self._items.extendleft(reversed(items))
            self._changed.notify_all()

    def get(self, timeout: float | None) -> Structure | None:
        """The next item; raises Empty when ``timeout`` (seconds, None: forever) passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while True:
                if self.closed:
                    return None
                if self._items and (self.running or self._items[0] is None):
                    return self._items.popleft()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise Empty
                self._changed.wait(remaining)

    def set_running(self, running: bool) -> None:
        with self._changed:
            self.running = running
            self._changed.notify_all()

    def close(self) -> list[Structure | None]:
        with self._changed:
            self.closed = True
            left = list(self._items)
            self._items.clear()
            self._changed.notify_all()
            return left

    def clear(self) -> None:
        with self._changed:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
