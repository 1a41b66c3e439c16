"""The broker's malloc settings (cli.tune_allocator, dovecote.allocator): stream blocks of a
few MiB, made and dropped a few at a time, reuse freed memory instead of faulting in fresh
pages for each."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pagefaults import BLOCK_PAGES, HUGE_PAGES_ALWAYS, faults_per_block

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc's malloc settings"
)
TUNED = "from dovecote.cli import tune_allocator\ntune_allocator()"


untuned = pytest.mark.skipif(HUGE_PAGES_ALWAYS, reason="a fresh mapping costs a few faults")


@untuned
def test_blocks_mapped_afresh_fault_their_pages_in() -> None:
    assert faults_per_block() > BLOCK_PAGES // 4


def test_large_blocks_reuse_freed_memory() -> None:
    assert faults_per_block(TUNED) < BLOCK_PAGES // 50


@untuned
@pytest.mark.parametrize(
    "setting",
    [
        {"MALLOC_MMAP_THRESHOLD_": str(128 << 10)},
        {"GLIBC_TUNABLES": f"glibc.malloc.mmap_threshold={128 << 10}"},
    ],
    ids=["MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"],
)
def test_settings_from_the_environment_are_left_as_they_are(setting: dict[str, str]) -> None:
    assert faults_per_block(TUNED, setting) > BLOCK_PAGES // 2  # every block a mapping


def test_the_first_call_in_a_process_decides() -> None:
    code = (
        "from dovecote import allocator\n"
        "print(allocator.tune_allocator(8 << 20, 16 << 20),"
        " allocator.tune_allocator(32 << 20, 64 << 20), allocator.applied)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == ["True", "True", "(8388608,", "16777216)"], out.stderr
