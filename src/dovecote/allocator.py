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
_ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
_TUNABLES = ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold")
_tried = False
applied: tuple[int, int] | None = None
"""The thresholds this process's first call set (None: it set none)."""


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
    import ctypes

    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # (not there on musl)
    if mallopt is None:
        return False
    # (Trimming first: should the threshold then fail, the heap is as it was for mapping.)
    if mallopt(_M_TRIM_THRESHOLD, trim_threshold) and mallopt(_M_MMAP_THRESHOLD, mmap_threshold):
        applied = (mmap_threshold, trim_threshold)
    return applied is not None
