"""The broker's message sequence numbers (``Message.sequence``), which streaming readers
use as offsets (compatibility X1; the Spark source).

A number must never be reused or go backwards, also across restarts, or a reader's committed
offset would skip new messages. Like a hybrid logical clock, each number is the larger of the
last one plus one and the wall clock in microseconds: after a restart, numbers continue above
every stored one (recovery raises ``last`` to the largest) and above everything handed out
before the restart even if those messages are gone, as long as the clock has not stepped back
by more than the time the broker was down.

Numbers are given out before the store write and become visible when the messages are
enqueued; the ``watermark`` is the highest number below which every message has been
enqueued, so a reader never plans a range that a slower write could still add to.
"""

from __future__ import annotations

import time


class Sequencer:
    __slots__ = ("_open", "last")

    def __init__(self) -> None:
        self.last = 0
        self._open: dict[int, int] = {}
        """First number of each batch between numbering and enqueueing (with counts)."""

    @staticmethod
    def clock() -> int:
        """The wall clock in microseconds."""
        return time.time_ns() // 1000

    def next_at(self, clock: int) -> int:
        """The next number for a ``clock`` read at most a moment ago: a batch reads the clock
        once for all its messages (a read per message cost more than the rest of the
        numbering). Numbers still never go backwards, and stay above the clock as read
        when their batch began."""
        seq = max(self.last + 1, clock)
        self.last = seq
        return seq

    def recovered(self, *largest: int) -> None:
        self.last = max(self.last, *largest)

    def opened(self, first: int) -> None:
        self._open[first] = self._open.get(first, 0) + 1

    def closed(self, first: int) -> None:
        left = self._open[first] - 1
        if left:
            self._open[first] = left
        else:
            del self._open[first]

    @property
    def watermark(self) -> int:
        return min(self._open) - 1 if self._open else self.last
