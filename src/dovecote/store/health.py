"""The store's stated mode: writable, or degraded (FORMAT.md, README: Persistence).

A store is degraded while a part of it fails for a reason of the disk's or the database's
(a full disk, an I/O error): its writes (``WRITES``), or, in the journal, the index that
catches up behind them (``INDEX``). Entering the mode logs one WARNING naming the reason and
what it means; further failures while degraded log at DEBUG; leaving it (every part works
again) logs one INFO line. ``degraded`` is what the admin API and metrics read.
"""

from __future__ import annotations

import logging
import time
from typing import Final

log = logging.getLogger("dovecote.store")

WRITES: Final = "writes"
INDEX: Final = "index"

_MEANS: Final = {
    WRITES: "sends that need the store fail with this reason until it can write again "
    "(tried with each send, and every few seconds on its own), consumers are served what "
    "is in memory, and acks are written where the disk allows",
    INDEX: "messages kept in the store only wait there until the index can be updated "
    "(tried again with each write)",
}


class StoreHealth:
    def __init__(self) -> None:
        self._problems: dict[str, str] = {}
        """Each failing part -> why, the first to fail first."""
        self._since = 0.0

    @property
    def degraded(self) -> str | None:
        """Why the store is degraded (the first failing part's reason), or None: every part
        of it works."""
        for reason in self._problems.values():
            return reason
        return None

    @property
    def refusing_writes(self) -> bool:
        return WRITES in self._problems

    def failed(self, part: str, reason: str) -> None:
        """``part`` failed for ``reason``: the store enters degraded mode (one WARNING) or
        stays in it (DEBUG)."""
        if part in self._problems:
            log.debug("store still degraded: %s", reason)
            return
        entering = not self._problems
        self._problems[part] = reason
        if entering:
            self._since = time.monotonic()
            log.warning("store degraded: %s; %s", reason, _MEANS[part])
        else:
            log.info("store degraded also: %s; %s", reason, _MEANS[part])

    def repaired(self, part: str) -> None:
        """``part`` works again; with no part failing, the store leaves degraded mode."""
        reason = self._problems.pop(part, None)
        if reason is None:
            return
        if self._problems:
            log.info("store %s work again (they failed: %s)", part, reason)
            return
        log.info("store writable again after %.1f s: leaving degraded mode (entered for: %s)",
                 time.monotonic() - self._since, reason)  # fmt: skip
