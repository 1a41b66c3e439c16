"""The journal's threads of its own: fsyncs that would stall the event loop, and reads
ahead of its appends (DataFiles.sync and DataFiles.prepare say when each is used)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
from pathlib import Path

READ_AHEAD_BUFFER = 1024 * 1024
READ_AHEAD_START_S = 0.01
"""How long the loop waits at most for an idle read-ahead thread to start a range."""
_IOV_MAX = 1024


class SyncThread:
    """A thread of its own for the fsyncs that would stall the event loop. The loop's
    default executor costs more than the disk here: its submit, work item, future with a
    condition, the asyncio future chained to it and the checks on the callable are all
    interpreted Python, twice a thread switch; this is a queue put, and one call back into
    the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._requests: queue.SimpleQueue[tuple[int, asyncio.Future[None]] | None] = (
            queue.SimpleQueue()
        )
        threading.Thread(target=self._run, name="journal-fsync", daemon=True).start()

    def fsync(self, fd: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = self._loop.create_future()
        self._requests.put((fd, future))
        return future

    def stop(self) -> None:
        self._requests.put(None)

    def _run(self) -> None:
        while (request := self._requests.get()) is not None:
            fd, future = request
            error: OSError | None = None
            try:
                os.fsync(fd)
            except OSError as exc:
                error = exc
            try:
                self._loop.call_soon_threadsafe(_settle, future, error)
            except RuntimeError:
                return  # the loop is closed: nobody waits any more


class ReadAhead:
    """A thread that reads ranges of data files (see DataFiles.prepare) into one buffer,
    for the pages they leave in the page cache; what it reads is not used. A range that
    is gone (a file removed, or shorter) ends its read quietly."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[Path, int, int, threading.Event] | None] = (
            queue.SimpleQueue()
        )
        self._asked = 0  # (each count has one writer: the loop, or the thread)
        self._done = 0
        threading.Thread(target=self._run, name="journal-read-ahead", daemon=True).start()

    def read(self, path: Path, start: int, end: int) -> None:
        begun = threading.Event()
        idle = self._asked == self._done
        self._asked += 1
        self._requests.put((path, start, end, begun))
        if idle:
            # Compiled, the loop's work never lets the GIL go by itself: the thread would
            # start only at the loop's next blocking call (the append, too late).
            begun.wait(READ_AHEAD_START_S)

    def stop(self) -> None:
        self._requests.put(None)

    def _run(self) -> None:
        buffer = bytearray(READ_AHEAD_BUFFER)
        while (request := self._requests.get()) is not None:
            path, position, end, begun = request
            try:
                self._read(path, position, end, buffer, begun)
            finally:
                begun.set()
                self._done += 1

    @staticmethod
    def _read(
        path: Path, position: int, end: int, buffer: bytearray, begun: threading.Event
    ) -> None:
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY)
            try:
                while position < end:
                    # The whole range in one call that lets the GIL go: once the loop has
                    # it back, this thread would wait for it between calls.
                    chunks = min(-(-(end - position) // READ_AHEAD_BUFFER), _IOV_MAX)
                    buffers = [buffer] * chunks
                    begun.set()
                    got = os.preadv(fd, buffers, position)
                    if got <= 0:
                        break
                    position += got
            finally:
                os.close(fd)


def _settle(future: asyncio.Future[None], error: OSError | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
