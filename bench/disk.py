"""What the disk under the brokers' stores takes, and what a broker writes to it.

A row of large persistent messages writes every body to disk, in both brokers. Neither syncs
a send nobody waits for (no receipt, no response required: KahaDB's rule, and dovecote's),
so such a row is not held to the disk's rate of synced appends; a broker syncing every group
would be. These two figures, read in the same run as the row, say how far each is from that.

A lone producer waiting for each persistent send's receipt is held to the disk's rate of
small synced appends instead (synced_appends_per_s): the harness reads it in the same run
and sets that row's target from it (issue 33: min(2,500 msg/s, 70% of the rate)).

    .venv/bin/python bench/disk.py [DIR]      # prints both rates
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

APPEND_BYTES = 1100
"""A 1 KiB message as a journal record (headers, properties, framing): about what dovecote
appends per persistent 1 KiB STOMP send (the issue's "synced 1.1 KB append")."""
APPEND_SECONDS = 3.0
PREALLOCATED_BYTES = 32 << 20

PROBE_BYTES = 64 << 20
PROBE_SYNC_EVERY = 2 << 20
"""About a group commit of 100 KiB messages here: ~20 of them per write and fsync."""


def synced_write_mb_s(directory: Path, total: int = PROBE_BYTES) -> float:
    """Append ``total`` bytes to a new file in ``directory``, fsync after every
    ``PROBE_SYNC_EVERY``, as a journal does; the rate in MB/s (10^6 bytes)."""
    chunk = os.urandom(PROBE_SYNC_EVERY)  # not zeros: nothing below may shortcut them
    fd, name = tempfile.mkstemp(dir=directory, prefix="disk-probe-")
    try:
        written = 0
        started = time.perf_counter()
        while written < total:
            written += os.write(fd, chunk)
            os.fsync(fd)
        return written / (time.perf_counter() - started) / 1e6
    finally:
        os.close(fd)
        os.unlink(name)


def synced_appends_per_s(
    directory: Path, size: int = APPEND_BYTES, seconds: float = APPEND_SECONDS
) -> float:
    """Append ``size`` bytes and fsync, again and again for ``seconds``, into a file
    preallocated first as the journal's data files are (so no append grows the file): what
    a lone synchronous producer's broker could do at best, each send a synced append of its
    own with no other work (the disk's rate, not the CPU's)."""
    record = os.urandom(size)
    fd, name = tempfile.mkstemp(dir=directory, prefix="disk-appends-")
    try:
        os.posix_fallocate(fd, 0, PREALLOCATED_BYTES)
        appends = 0
        started = time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds:
            os.pwrite(fd, record, (appends * size) % (PREALLOCATED_BYTES - size))
            os.fsync(fd)
            appends += 1
        return appends / elapsed
    finally:
        os.close(fd)
        os.unlink(name)


def written_bytes(pid: int) -> int:
    """Bytes process ``pid`` (all its threads) has sent, or dirtied for, the storage layer
    (``write_bytes`` of /proc/PID/io)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/io has no write_bytes")


def disk_note(
    name: str, figures: dict[str, tuple[int, int, float]], titles: dict[str, str], probe_mb_s: float
) -> str:
    """The note under a disk-heavy row: what each broker wrote per message and how fast,
    against what the disk took alone. ``figures``: by kind, (messages, bytes written,
    seconds), dovecote's first; ``titles``: each kind's name in the note."""
    said: list[str] = []
    stored: list[float] = []
    for kind, (messages, written, seconds) in figures.items():
        per_message = written / max(messages, 1)
        stored += [per_message] if per_message > 0 else []
        rate = written / seconds / 1e6 if seconds > 0 else 0.0
        said.append(f"{titles[kind]} {per_message / 1024:.1f} KiB at {rate:.0f} MB/s")
    best = f"{probe_mb_s * 1e6 / min(stored):,.0f} msg/s" if stored else "-"
    return (
        f"{name}: written to disk per message and how fast: {', '.join(said)} (none syncs"
        f" a send nobody waits for); the disk took {probe_mb_s:.0f} MB/s of synced appends"
        f" alone (bench/disk.py), which would hold a broker syncing every group to at most"
        f" {best}"
    )


UNSTORED_SHARE = 0.1
"""A broker writing under this share of dovecote's bytes per persistent message has not
stored them all."""


def unstored_note(name: str, per_message: dict[str, float], titles: dict[str, str]) -> str | None:
    """Said under a row of persistent messages where a peer wrote almost nothing of what
    dovecote wrote per message (``per_message``: bytes, by kind): its receipts there do not
    mean stored, as RabbitMQ's for a message its consumer has already taken."""
    ours = per_message.get("dovecote", 0.0)
    if ours < 1024:
        return None  # not a row whose messages dovecote stores
    light = [k for k, v in per_message.items() if k != "dovecote" and v < UNSTORED_SHARE * ours]
    if not light:
        return None
    said = ", ".join(f"{titles[k]} {per_message[k]:,.0f} B" for k in per_message)
    return (
        f"{name}: written to disk per message: {said}. {' and '.join(titles[k] for k in light)}"
        " did not store these persistent messages: RabbitMQ confirms a message its consumer"
        " has already taken without writing it (its receipts mean stored or consumed), where"
        " dovecote and ActiveMQ stored each one before its receipt"
    )


if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.gettempdir())
    print(f"synced appends of 2 MiB: {synced_write_mb_s(where):.0f} MB/s")
    print(f"synced appends of {APPEND_BYTES} B: {synced_appends_per_s(where):,.0f} per s")
