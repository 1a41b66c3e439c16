"""The journal directory's lock: the broker holding it owns the store (ActiveMQ's shared
file lock, how a master and its slaves share one store)."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from pathlib import Path
from typing import Final

log = logging.getLogger("dovecote.store.journal")

LOCK_POLL_S: Final = 0.5


async def take_lock(directory: Path) -> int:
    """The descriptor of ``directory``'s lock file, locked (closing it releases the lock);
    while another broker holds it, waits as a slave, polling."""
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    waiting = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waiting:
                    log.info("store %s is locked by another broker; waiting as a slave",
                             directory)  # fmt: skip
                    waiting = True
                await asyncio.sleep(LOCK_POLL_S)
    except BaseException:  # cancelled while waiting: a slave told to stop
        os.close(fd)
        raise
    if waiting:
        log.info("store %s lock acquired; this broker is now the master", directory)
    return fd
