"""Pausing the cyclic garbage collector around bursts of allocation."""

from __future__ import annotations

import gc


class NoCollections:
    """``with NoCollections():`` around a burst of containers of which most die soon (a
    batch's operations as lists, the index's entries for them; a large transaction's commit,
    its awaits included): a collection in the middle would only walk them and promote them
    to an older generation, for later collections to walk again; once they are freed, the
    young generation's count is back down, and what lives on is walked once, after. Nested
    or overlapping uses are safe: only the one that paused the collector resumes it."""

    def __init__(self) -> None:
        self.collecting = False

    def __enter__(self) -> None:
        self.collecting = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.collecting:
            gc.enable()
