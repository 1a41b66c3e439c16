"""Memory the broker freed and left unused goes back to the system (allocator.FreeMemoryReturn):
when to trim, on figures given; and glibc keeping freed memory until trimmed, in a process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dovecote.allocator import FreeMemoryReturn, can_trim

MIB = 1 << 20


class Heap:
    """Figures as a test sets them: the broker's messages in memory and the resident memory.
    A trim gives back what is resident beyond the messages and ``kept``."""

    def __init__(self, in_use: int, resident: int, kept: int = 0) -> None:
        self.in_use, self.resident, self.kept = in_use, resident, kept
        self.trims = 0

    def trim(self) -> None:
        self.trims += 1
        self.resident = self.in_use + self.kept

    def giver(self, after_s: float = 10.0) -> FreeMemoryReturn:
        return FreeMemoryReturn(
            after_s, lambda: self.in_use, 32 * MIB, lambda: self.resident, self.trim
        )


def test_memory_left_free_is_given_back_once_it_has_stayed_free_for_the_delay() -> None:
    heap = Heap(in_use=0, resident=20 * MIB, kept=20 * MIB)
    giver = heap.giver(after_s=10)
    assert giver.check(0) == 0
    heap.in_use, heap.resident = 200 * MIB, 222 * MIB  # a backlog held
    assert giver.check(1) == 0
    heap.in_use = 0  # ...and consumed: its pages stay
    assert [giver.check(t) for t in (2, 5, 11)] == [0, 0, 0]
    assert heap.trims == 0
    assert giver.check(12) == 202 * MIB
    assert (heap.trims, heap.resident) == (1, 20 * MIB)
    assert [giver.check(t) for t in (13, 30, 60)] == [0, 0, 0]  # nothing more to give
    assert heap.trims == 1


def test_memory_taken_up_again_before_the_delay_is_kept() -> None:
    heap = Heap(in_use=0, resident=20 * MIB)
    giver = heap.giver(after_s=10)
    giver.check(0)
    heap.in_use, heap.resident = 200 * MIB, 222 * MIB
    giver.check(1)
    heap.in_use = 0  # consumed...
    giver.check(2)
    heap.in_use = 200 * MIB  # ...and the next burst takes the memory up again
    giver.check(7)
    heap.in_use = 0  # consumed again: the delay starts anew
    assert [giver.check(t) for t in (8, 13, 17)] == [0, 0, 0]
    assert heap.trims == 0
    assert giver.check(18) > 0


def test_a_heap_that_grows_with_the_messages_it_holds_is_not_trimmed() -> None:
    heap = Heap(in_use=0, resident=20 * MIB)
    giver = heap.giver(after_s=1)
    for t in range(20):  # a backlog building up, the heap with it
        heap.in_use += 20 * MIB
        heap.resident += 21 * MIB
        giver.check(t)
    assert heap.trims == 0


def test_little_idle_memory_is_kept() -> None:
    heap = Heap(in_use=0, resident=20 * MIB)
    giver = heap.giver(after_s=1)
    giver.check(0)
    heap.resident = 50 * MIB  # under the least given back
    assert [giver.check(t) for t in range(1, 10)] == [0] * 9
    assert heap.trims == 0


def test_pages_glibc_gave_back_itself_do_not_hide_later_idle_ones() -> None:
    heap = Heap(in_use=100 * MIB, resident=150 * MIB)
    giver = heap.giver(after_s=1)
    giver.check(0)
    heap.resident = 100 * MIB  # glibc trimmed its heap's top itself
    giver.check(1)
    heap.resident = 140 * MIB  # 40 MiB used and freed since
    assert [giver.check(t) for t in (2, 3)] == [0, 40 * MIB]


def test_without_figures_nothing_is_trimmed() -> None:
    trims: list[None] = []
    giver = FreeMemoryReturn(0.0, lambda: 0, 1, lambda: None, lambda: trims.append(None))
    assert [giver.check(t) for t in range(5)] == [0] * 5
    assert trims == []


FRAGMENTED = """
import os
from dovecote.allocator import resident_anonymous as resident, trim_heap
MIB = 1 << 20

before = resident()
held = [os.urandom(8) * 128 for _ in range(100_000)]  # 100 MiB of 1 KiB objects
grown = resident() - before
kept = held[::400]  # one every 400 KiB or so: no free stretch at the heap's top
del held
freed = resident() - before
trim_heap()
print(grown // MIB, freed // MIB, (resident() - before) // MIB, len(kept))
"""


@pytest.mark.skipif(not can_trim(), reason="glibc's malloc_trim")
def test_glibc_keeps_a_fragmented_heap_until_trimmed() -> None:
    # (in a process of its own: this one's heap has free memory of its own to reuse)
    done = subprocess.run(
        [sys.executable, "-c", FRAGMENTED], capture_output=True, text=True, check=True
    )
    grown, freed, trimmed, kept = map(int, done.stdout.split())
    assert grown > 90 and kept == 250
    assert freed > grown * 3 // 4  # freed, still resident
    assert trimmed < grown // 4
