"""The broker's message sequence numbers (broker/sequencer.py): never reused, never going
backwards, above the clock as read when they are given out, above everything recovered."""

from __future__ import annotations

from dovecote.broker.sequencer import Sequencer


def test_numbers_follow_the_clock_and_never_go_backwards() -> None:
    seq = Sequencer()
    assert seq.next_at(1_000) == 1_000  # the clock, ahead of the last number
    assert seq.next_at(1_000) == 1_001  # one clock reading for a batch: one apart
    assert seq.next_at(1_000) == 1_002
    assert seq.next_at(900) == 1_003  # a clock stepped back does not take numbers back
    assert seq.next_at(5_000) == 5_000


def test_recovery_raises_the_numbers_above_every_stored_one() -> None:
    seq = Sequencer()
    seq.recovered(7_000, 3)
    assert seq.next_at(5_000) == 7_001


def test_numbers_from_the_wall_clock_are_in_microseconds() -> None:
    seq = Sequencer()
    before = Sequencer.clock()
    first, second = seq.next_at(Sequencer.clock()), seq.next_at(Sequencer.clock())
    assert before <= first < second <= Sequencer.clock() + 1
    assert abs(first - before) < 60 * 1_000_000  # microseconds, not nanoseconds or seconds
