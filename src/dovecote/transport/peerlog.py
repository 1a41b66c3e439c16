"""Logging what peers do wrong without letting them fill the disk or stall the loop.

A peer's error is worth one line: what it sent and what the broker answered. A hostile or
broken peer can send thousands a second, so lines are limited per connection (the first few)
and for the whole process (a burst, then a few a second); what is left out is counted and
said in one line, "N more ... suppressed", once the window has passed. Tracebacks of peer
errors are logged only at DEBUG. A bug in the broker itself (an exception that is not a
DovecoteError while running a command) logs its traceback once per place it was raised;
its later occurrences are one rate-limited line each.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

PER_CONNECTION = 3
"""Lines about one connection's errors before the rest of them are only counted."""
BURST = 20
PER_SECOND = 2.0
"""The whole process: ``BURST`` lines at once, then this many a second."""


class ConnectionBudget:
    """One connection's share of the lines."""

    __slots__ = ("logged", "suppressed")

    def __init__(self) -> None:
        self.logged = 0
        self.suppressed = 0


class PeerLog:
    def __init__(
        self, per_connection: int = PER_CONNECTION, burst: int = BURST,
        per_second: float = PER_SECOND,
    ) -> None:  # fmt: skip
        self.per_connection = per_connection
        self.burst = burst
        self.per_second = per_second
        self._tokens = float(burst)
        self._refilled = time.monotonic()
        self.suppressed = 0
        self._summary_due = False
        self._bugs_seen: set[tuple[str, str, int]] = set()
        self._logger: logging.Logger | None = None

    def _allow(self, budget: ConnectionBudget | None) -> bool:
        if budget is not None and budget.logged >= self.per_connection:
            budget.suppressed += 1
            self._suppress()
            return False
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._refilled) * self.per_second)
        self._refilled = now
        if self._tokens < 1:
            self._suppress()
            return False
        self._tokens -= 1
        if budget is not None:
            budget.logged += 1
        return True

    def _suppress(self) -> None:
        self.suppressed += 1
        if not self._summary_due:
            self._summary_due = True
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            loop.call_later(max(1.0, 1 / self.per_second), self.flush)

    def flush(self) -> None:
        """Say how many lines were left out since the last time (one line, if any)."""
        self._summary_due = False
        if self.suppressed and self._logger is not None:
            self._logger.warning("%d more peer errors suppressed", self.suppressed)
        self.suppressed = 0

    def peer(
        self, logger: logging.Logger, budget: ConnectionBudget | None, message: str,
        *args: Any, exc: BaseException | None = None, level: int = logging.WARNING,
    ) -> None:  # fmt: skip
        """One line about a peer's error, if the limits allow; its traceback only at DEBUG."""
        if not logger.isEnabledFor(level) or not self._allow(budget):
            return
        self._logger = logger
        logger.log(level, message, *args)
        if exc is not None and logger.isEnabledFor(logging.DEBUG):
            logger.debug("the peer's error in full", exc_info=exc)

    def bug(self, logger: logging.Logger, budget: ConnectionBudget | None, what: str,
            exc: BaseException) -> None:  # fmt: skip
        """An exception the broker should not have raised: its traceback the first time it
        comes from its place, a line (rate-limited) after that."""
        frame = exc.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        code = frame.tb_frame.f_code if frame is not None else None
        place = (type(exc).__name__, code.co_filename if code else "?",
                 frame.tb_lineno if frame is not None else 0)  # fmt: skip
        if place not in self._bugs_seen:
            self._bugs_seen.add(place)
            # The chain of what was being handled when it was raised says nothing here.
            exc.__context__ = None
            logger.error("internal error %s: %s", what, exc, exc_info=exc)
            return
        self.peer(logger, budget, "internal error %s (logged before): %r", what, exc,
                  level=logging.ERROR)  # fmt: skip


PEER_LOG = PeerLog()
"""The process's one budget: every listener's connections share it."""


def peer_address(transport: Any) -> str:
    """host:port of a socket's remote end ("?" when the transport cannot say)."""
    try:
        peer = transport.get_extra_info("peername")
    except Exception:  # a closed or odd transport: the address is only for logs and views
        return "?"
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
