"""glibc's malloc settings for a process that makes and drops buffers of a few MiB, such as
stream blocks: from the heap, a freed buffer's pages are reused. glibc maps a buffer that
large afresh and gives it back when freed, until its adaptive threshold has grown past the
buffer's size, and it trims its heap once twice that threshold is free at the top: with
sizes that vary and a few alive at once, most blocks' pages were faulted in and zeroed
again (figures: docs/performance.md). The broker and a Spark executor's reads set them."""

from __future__ import annotations

import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
_tuned = False


def tune_allocator(mmap_threshold: int, trim_threshold: int) -> bool:
    """Allocations under ``mmap_threshold`` from the heap, and up to ``trim_threshold`` of
    free memory kept at its top: once a process, on glibc, unless the environment sets these
    itself (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_). Returns whether they are set."""
    global _tuned
    if _tuned:
        return True
    if not sys.platform.startswith("linux"):
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    import ctypes

    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # (not there on musl)
    if mallopt is None:
        return False
    _tuned = bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(
        mallopt(_M_TRIM_THRESHOLD, trim_threshold)
    )
    return _tuned
