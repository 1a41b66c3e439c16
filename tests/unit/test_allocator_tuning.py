"""The broker's malloc settings (cli.tune_allocator, dovecote.allocator): stream blocks of a
few MiB, made and dropped a few at a time, reuse freed memory instead of faulting in fresh
pages for each."""

from __future__ import annotations

import sys

import pytest

from pagefaults import BLOCK_PAGES, faults_per_block

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc's malloc settings"
)
TUNED = "from dovecote.cli import tune_allocator\ntune_allocator()"


def test_large_blocks_reuse_freed_memory() -> None:
    assert faults_per_block() > BLOCK_PAGES // 4  # each block's pages faulted in anew
    assert faults_per_block(TUNED) < BLOCK_PAGES // 50


def test_settings_from_the_environment_are_left_as_they_are() -> None:
    mapped = {"MALLOC_MMAP_THRESHOLD_": str(128 << 10)}  # every block a mapping of its own
    assert faults_per_block(TUNED, mapped) > BLOCK_PAGES // 2
