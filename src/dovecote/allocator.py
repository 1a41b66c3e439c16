"""glibc's malloc settings for a process that makes and drops buffers of a few MiB, such as
stream blocks: from the heap, a freed buffer's pages are reused. glibc maps a buffer that
large afresh and gives it back when freed, until its adaptive threshold has grown past the
buffer's size, and it trims its heap once twice that threshold is free at the top: with
sizes that vary and a few alive at once, most blocks' pages were faulted in and zeroed
again (figures: docs/performance.md). The broker and a Spark executor's reads set them.
And, for the broker, memory that stays free and unused is given back (FreeMemoryReturn)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, Final

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
_ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
_TUNABLES = ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold")
_tried = False
applied: tuple[int, int] | None = None
"""The thresholds this process's first call set (None: it set none)."""
_libc: Any = None


def tune_allocator(mmap_threshold: int, trim_threshold: int) -> bool:
    """Allocations under ``mmap_threshold`` from the heap, and up to ``trim_threshold`` of
    free memory kept at its top: on glibc, unless the environment sets either itself
    (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, or GLIBC_TUNABLES). The first call in a
    process decides; later ones return whether it set them (``applied`` says to what)."""
    global _tried, applied
    if _tried:
        return applied is not None
    _tried = True
    if not sys.platform.startswith("linux"):
        return False
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if any(name in os.environ for name in _ENVIRONMENT) or any(t in tunables for t in _TUNABLES):
        return False
    mallopt = getattr(_c_library(), "mallopt", None)  # (not there on musl)
    if mallopt is None:
        return False
    # (Trimming first: should the threshold then fail, the heap is as it was for mapping.)
    if mallopt(_M_TRIM_THRESHOLD, trim_threshold) and mallopt(_M_MMAP_THRESHOLD, mmap_threshold):
        applied = (mmap_threshold, trim_threshold)
    return applied is not None


RETURN_AT_LEAST: Final = 32 << 20
"""Free memory is given back only when at least this much of it looks idle."""


def _c_library() -> Any | None:
    """The process's C library, loaded once (None off Linux)."""
    global _libc
    if _libc is None:
        _libc = False
        if sys.platform.startswith("linux"):
            import ctypes  # (here: the client tools do without)

            _libc = ctypes.CDLL(None)
            if hasattr(_libc, "malloc_trim"):
                _libc.malloc_trim.argtypes = [ctypes.c_size_t]
    return _libc or None


def _malloc_trim() -> Any | None:
    """glibc's malloc_trim (None elsewhere: another libc, another system)."""
    return getattr(_c_library(), "malloc_trim", None)


def can_trim() -> bool:
    """Whether this process's malloc can give free memory back (glibc)."""
    return _malloc_trim() is not None


def trim_heap() -> None:
    """Give the pages of every free stretch of the heaps back to the system."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def resident_anonymous(pid: int | None = None) -> int | None:
    """A process's resident anonymous memory in bytes, this one's by default (None where
    /proc cannot say)."""
    try:
        with open(f"/proc/{pid or 'self'}/status", "rb") as status:
            line = next(line for line in status if line.startswith(b"RssAnon:"))
    except (OSError, StopIteration):
        return None
    return int(line.split()[1]) * 1024


class FreeMemoryReturn:
    """Gives back memory that has stayed free for ``after_s``: what a drained backlog left.

    glibc keeps what a process frees for its next allocations, and gives back only a free
    stretch at the very top of its heap: one long-lived object above a drained backlog keeps
    all of it resident (figures: docs/performance.md). ``check``, called now and then, trims
    once the resident memory has stayed at least ``least`` bytes above what ``in_use`` (the
    broker's messages) accounts for since the last trim, at every check for ``after_s``:
    memory that the next burst takes up again stays. (Not glibc's own figures: mallinfo2
    walks every free chunk, as long as a trim on a heap cut into many.)"""

    def __init__(
        self,
        after_s: float,
        in_use: Callable[[], int],
        least: int = RETURN_AT_LEAST,
        resident: Callable[[], int | None] = resident_anonymous,
        trim: Callable[[], None] = trim_heap,
    ) -> None:
        self.after_s = after_s
        self.least = least
        self._in_use = in_use
        self._resident = resident
        self._trim = trim
        self._base: tuple[int, int] | None = None
        """Memory in use and resident after the last trim (or when the fewest pages were
        resident beyond what was in use since)."""
        self._since: float | None = None
        """When the memory to give back was first seen, at every check since."""

    def check(self, now: float) -> int:
        """Trims if it is time to: the resident bytes it gave back (0: no trim)."""
        resident = self._resident()
        if resident is None:
            return 0
        in_use = self._in_use()
        if self._base is None:
            self._base = in_use, resident
        idle = (resident - self._base[1]) - (in_use - self._base[0])
        if idle < 0:  # (fewer idle pages than at the base: glibc trimmed the top itself)
            self._base, idle = (in_use, resident), 0
        if idle < self.least:
            self._since = None
            return 0
        if self._since is None:
            self._since = now
        if now - self._since < self.after_s:
            return 0
        self._trim()
        after = self._resident()
        remaining = after if after is not None else resident
        self._base, self._since = (self._in_use(), remaining), None
        return max(0, resident - remaining)
