"""Memory the broker freed and left unused goes back to the system (allocator.FreeMemoryReturn):
when to trim, on figures given; and glibc's own figures and trim, in a process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dovecote.allocator import FreeMemoryReturn, heap_figures

MIB = 1 << 20


class Heap:
    """Figures as a test sets them; a trim gives back what is resident and not in use,
    down to ``kept`` bytes of it."""

    def __init__(self, free: int, in_use: int, resident: int, kept: int = 0) -> None:
        self.free, self.in_use, self.resident, self.kept = free, in_use, resident, kept
        self.trims = 0

    def figures(self) -> tuple[int, int, int]:
        return self.free, self.in_use, self.resident

    def trim(self) -> None:
        self.trims += 1
        self.resident = self.in_use + self.kept

    def giver(self, after_s: float = 10.0) -> FreeMemoryReturn:
        return FreeMemoryReturn(after_s, 32 * MIB, self.figures, self.trim)


def test_memory_left_free_is_given_back_once_it_has_stayed_free_for_the_delay() -> None:
    heap = Heap(free=2 * MIB, in_use=20 * MIB, resident=20 * MIB)
    giver = heap.giver(after_s=10)
    assert giver.check(0) == 0
    heap.in_use, heap.resident = 220 * MIB, 222 * MIB  # a backlog held
    assert giver.check(1) == 0
    heap.free, heap.in_use = 200 * MIB, 20 * MIB  # ...and consumed: its pages stay
    assert [giver.check(t) for t in (2, 5, 11)] == [0, 0, 0]
    assert heap.trims == 0
    assert giver.check(12) == 202 * MIB
    assert (heap.trims, heap.resident, giver.trims, giver.returned) == (1, 20 * MIB, 1, 202 * MIB)
    assert [giver.check(t) for t in (13, 30, 60)] == [0, 0, 0]  # nothing resident to give
    assert heap.trims == 1


def test_memory_taken_up_again_before_the_delay_is_kept() -> None:
    heap = Heap(free=2 * MIB, in_use=20 * MIB, resident=20 * MIB)
    giver = heap.giver(after_s=10)
    giver.check(0)
    heap.free, heap.resident = 200 * MIB, 222 * MIB  # freed...
    giver.check(1)
    heap.free, heap.in_use = 2 * MIB, 220 * MIB  # ...and used again by the next burst
    giver.check(6)
    heap.free, heap.in_use = 200 * MIB, 20 * MIB  # freed again: the delay starts anew
    assert [giver.check(t) for t in (7, 12, 16)] == [0, 0, 0]
    assert heap.trims == 0
    assert giver.check(17) > 0


def test_a_heap_that_grows_with_what_it_holds_is_not_trimmed() -> None:
    heap = Heap(free=40 * MIB, in_use=20 * MIB, resident=60 * MIB)
    giver = heap.giver(after_s=1)
    for t in range(20):  # a backlog building up; some free memory all along
        heap.in_use += 20 * MIB
        heap.resident += 20 * MIB
        giver.check(t)
    assert heap.trims == 0


def test_little_free_memory_is_kept() -> None:
    heap = Heap(free=2 * MIB, in_use=20 * MIB, resident=20 * MIB)
    giver = heap.giver(after_s=1)
    giver.check(0)
    heap.free, heap.resident = 30 * MIB, 50 * MIB  # under the least given back
    assert [giver.check(t) for t in range(1, 10)] == [0] * 9
    assert heap.trims == 0


def test_pages_glibc_gave_back_itself_do_not_hide_later_free_ones() -> None:
    heap = Heap(free=50 * MIB, in_use=100 * MIB, resident=150 * MIB)
    giver = heap.giver(after_s=1)
    giver.check(0)
    heap.free, heap.resident = 0, 100 * MIB  # glibc trimmed its heap's top itself
    giver.check(1)
    heap.free, heap.resident = 40 * MIB, 140 * MIB  # 40 MiB used and freed since
    assert [giver.check(t) for t in (2, 3)] == [0, 40 * MIB]


def test_without_figures_nothing_is_trimmed() -> None:
    trims: list[None] = []
    giver = FreeMemoryReturn(0.0, 1, lambda: None, lambda: trims.append(None))
    assert [giver.check(t) for t in range(5)] == [0] * 5
    assert trims == []


FRAGMENTED = """
import os
from dovecote.allocator import heap_figures, trim_heap
MIB = 1 << 20

def resident():
    return heap_figures()[2]

before = resident()
held = [os.urandom(8) * 128 for _ in range(100_000)]  # 100 MiB of 1 KiB objects
grown = resident() - before
kept = held[::400]  # one every 400 KiB or so: no free stretch at the heap's top
del held
free = heap_figures()[0]
freed = resident() - before
trim_heap()
print(grown // MIB, free // MIB, freed // MIB, (resident() - before) // MIB, len(kept))
"""


@pytest.mark.skipif(heap_figures() is None, reason="glibc's mallinfo2 and malloc_trim")
def test_glibc_keeps_a_fragmented_heap_until_trimmed() -> None:
    # (in a process of its own: this one's heap has free memory of its own to reuse)
    done = subprocess.run(
        [sys.executable, "-c", FRAGMENTED], capture_output=True, text=True, check=True
    )
    grown, free, freed, trimmed, kept = map(int, done.stdout.split())
    assert grown > 90 and free > 90 and kept == 250
    assert freed > grown * 3 // 4  # freed, still resident
    assert trimmed < grown // 4
