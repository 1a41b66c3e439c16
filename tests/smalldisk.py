"""A small filesystem for full-disk tests: a tmpfs mounted for the test (root only: the test
is skipped elsewhere), and ballast that fills it as another process would."""

from __future__ import annotations

import errno
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MiB = 1024 * 1024


@contextmanager
def mounted_tmpfs(mount: Path, mib: int) -> Iterator[Path]:
    mount.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={mib}M", "tmpfs", str(mount)],
        capture_output=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path, leave: int = 0, name: str = "ballast") -> Path:
    """Write a file that leaves about ``leave`` bytes free (0: none at all)."""
    ballast = mount / name
    with ballast.open("ab", buffering=0) as f:
        while (free := shutil.disk_usage(mount).free - leave) > 0:
            try:
                f.write(b"\0" * min(free, MiB))
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    return ballast
