"""Pausing the cyclic garbage collector around bursts of allocation."""

from __future__ import annotations

import gc


class NoCollections:
    """``with NoCollections():`` around a burst of containers of which most die soon (a
    batch's operations as lists, the index's entries for them; a large transaction's commit,
    its awaits included): a collection in the middle would only walk them and promote them
    to an older generation, for later collections to walk again; once they are freed, the
    young generation's count is back down, and what lives on is walked once, after. Nested
    or overlapping uses are safe: only the one that paused the collector resumes it.

    ``promote``: what lives on goes straight to the oldest generation, unwalked (a large
    commit's messages and entries, which a queue holds until they are consumed, would
    otherwise be walked by a young and then a middle collection; docs/performance.md).
    Start-up's frozen objects join them there, and so does any cyclic garbage of the
    moment, for the next full collection (rare at cli.tune_collector's threshold)."""

    def __init__(self, promote: bool = False) -> None:
        self.collecting = False
        self.promote = promote

    def __enter__(self) -> None:
        self.collecting = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.collecting:
            if self.promote:
                gc.freeze()  # (every generation's objects, and the young count to 0)
                gc.unfreeze()  # (all of them, into the oldest generation)
            gc.enable()
