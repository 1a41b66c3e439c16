"""Page faults of stream blocks made and dropped in a child process: a process's malloc
settings are for its life (dovecote.allocator)."""

from __future__ import annotations

import os
import subprocess
import sys

BLOCK_PAGES = (4 << 20) // os.sysconf("SC_PAGE_SIZE")
"""A 4 MiB block's pages."""


def _huge_pages_always() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[always]" in f.read()
    except OSError:
        return False


HUGE_PAGES_ALWAYS = _huge_pages_always()
"""Every large mapping in huge pages: a block mapped afresh then costs a few faults, not one
a page, and a test of the untuned allocator's faults cannot tell."""

_BLOCKS = """
import resource
parts = [os.urandom(1024) for _ in range(4096)]
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def per_block(rounds):  # three 4 MiB blocks alive at once (two readers and the next block)
    before = faults()
    for _ in range(rounds):
        blocks = [b"".join(parts) for _ in range(3)]
        others = [bytes(100) for _ in range(1_000)]
        del blocks
    return (faults() - before) / (3 * rounds)
per_block(10)
print(min(per_block(10) for _ in range(3)))
"""
"""The fewest faults per block over three windows of ten rounds: a window the machine's own
reclaim reached (once under a busy CI run) is not the allocator's doing."""


def faults_per_block(first: str = "", env: dict[str, str] | None = None) -> float:
    """The page faults per 4 MiB block made and dropped, in a child that runs ``first``
    before (with ``env`` added to the environment)."""
    code = f"import os\n{first}\n{_BLOCKS}"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split()[-1])
