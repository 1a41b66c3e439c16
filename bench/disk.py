"""What the disk under the brokers' stores takes, and what a broker writes to it.

A row of large persistent messages writes every body to disk, in both brokers. Neither syncs
a send nobody waits for (no receipt, no response required: KahaDB's rule, and dovecote's),
so such a row is not held to the disk's rate of synced appends; a broker syncing every group
would be. These two figures, read in the same run as the row, say how far each is from that.

    .venv/bin/python bench/disk.py [DIR]      # prints the synced write rate in MB/s
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

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


def written_bytes(pid: int) -> int:
    """Bytes process ``pid`` (all its threads) has sent, or dirtied for, the storage layer
    (``write_bytes`` of /proc/PID/io)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/io has no write_bytes")


def disk_note(
    name: str,
    messages: tuple[int, int],
    written: tuple[int, int],
    seconds: tuple[float, float],
    probe_mb_s: float,
) -> str:
    """The note under a disk-heavy row: what each broker wrote per message and how fast,
    against what the disk took alone (each pair: dovecote's, ActiveMQ's)."""
    per_message = [w / max(m, 1) for w, m in zip(written, messages, strict=True)]
    rates = [w / s / 1e6 if s > 0 else 0.0 for w, s in zip(written, seconds, strict=True)]
    least = min(per_message)
    best = f"{probe_mb_s * 1e6 / least:,.0f} msg/s" if least > 0 else "-"
    return (
        f"{name}: dovecote wrote {per_message[0] / 1024:.1f} KiB per message to disk at"
        f" {rates[0]:.0f} MB/s, ActiveMQ {per_message[1] / 1024:.1f} KiB at {rates[1]:.0f} MB/s"
        f" (neither syncs a send nobody waits for); the disk took {probe_mb_s:.0f} MB/s of"
        f" synced appends alone (bench/disk.py), which would hold a broker syncing every"
        f" group to at most {best}"
    )


if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.gettempdir())
    print(f"synced appends: {synced_write_mb_s(where):.0f} MB/s")
