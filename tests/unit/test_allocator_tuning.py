"""The broker's malloc settings (cli.tune_allocator): stream blocks of a few MiB, made and
dropped a few at a time, reuse freed memory instead of faulting in fresh pages for each.
Run in a child process: the settings are for the life of a process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHILD = """
import os, resource, sys
from dovecote.cli import tune_allocator
if sys.argv[1] == "tuned":
    tune_allocator()
parts = [os.urandom(1024) for _ in range(4096)]
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for round_ in range(20):  # three 4 MiB blocks alive at once (two readers and the next block)
    if round_ == 10:
        before = faults()
    blocks = [b"".join(parts) for _ in range(3)]
    others = [bytes(100) for _ in range(1_000)]
    del blocks
print((faults() - before) / 30)
"""

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc's malloc settings"
)


def _faults_per_block(mode: str, env: dict[str, str] | None = None) -> float:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode],
        capture_output=True, text=True, check=True, env={**os.environ, **(env or {})},
    ).stdout  # fmt: skip
    return float(out)


def test_large_blocks_reuse_freed_memory() -> None:
    pages = (4 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert _faults_per_block("default") > pages // 4  # each block's pages faulted in anew
    assert _faults_per_block("tuned") < pages // 50


def test_settings_from_the_environment_are_left_as_they_are() -> None:
    pages = (4 << 20) // os.sysconf("SC_PAGE_SIZE")
    mapped = {"MALLOC_MMAP_THRESHOLD_": str(128 << 10)}  # every block a mapping of its own
    assert _faults_per_block("tuned", mapped) > pages // 2
