"""The index's shortcut for messages sent and consumed between two catch-ups: applying a run
of records with ``apply_records`` (adds and removals that cancel out left out) must leave
the index exactly as applying every record in order does, in every named database, the
queue totals and the highest seq included."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from contract import Q, msg, sub

from dovecote.core.destinations import queue
from dovecote.store.api import (
    AddSubscription,
    RemoveDestination,
    RemoveMessage,
    UpdateRedelivery,
)
from dovecote.store.journal.datafiles import Location
from dovecote.store.journal.index import Index, passing_through
from dovecote.store.journal.records import JournalOp, SequencedAdd

Q2 = queue("other")
A1, A2, A3 = (SequencedAdd(i, msg(i)) for i in (1, 2, 3))


def remove(i: int, destination: object = Q) -> RemoveMessage:
    return RemoveMessage(destination, msg(i).message_id)  # type: ignore[arg-type]


DUPLICATE = SequencedAdd(4, replace(msg(1), body=b"the same id again"))
ON_Q2 = SequencedAdd(5, msg(1, Q2))
MOVED = SequencedAdd(1, msg(1))  # a compaction's move: an indexed seq again

# Each case: records already applied (the index before), then the records of one catch-up.
CASES: dict[str, tuple[list[list[JournalOp]], list[list[JournalOp]]]] = {
    "sent and consumed in one record": ([], [[A1, remove(1)]]),
    "sent, then consumed in a later record": ([], [[A1], [A2], [remove(1)]]),
    "consumed, one left": ([], [[A1, A2, A3], [remove(2), remove(1)]]),
    "removed twice": ([], [[A1], [remove(1)], [remove(1)]]),
    "consumed then sent again": ([], [[A1], [remove(1)], [SequencedAdd(2, msg(1))]]),
    "redelivery counted in between": ([], [[A1], [UpdateRedelivery(Q, msg(1).message_id, 2)],
                                            [remove(1)]]),
    "queue removed in between": ([], [[A1, A2], [RemoveDestination(Q)], [remove(1)]]),
    "the same id sent twice": ([], [[A1], [DUPLICATE], [remove(1)]]),
    "the same id sent three times": ([], [[A1], [DUPLICATE], [SequencedAdd(6, msg(1))],
                                           [remove(1)]]),
    "the same id on two queues": ([], [[A1, ON_Q2], [remove(1, Q2)]]),
    "the id already stored": ([[A1]], [[SequencedAdd(2, msg(1))], [remove(1)]]),
    "a stored message moved and consumed": ([[A1]], [[MOVED], [remove(1)]]),
    "a stored message consumed": ([[A1]], [[A2, remove(1)]]),
    "topic messages go their own way": (
        [[AddSubscription(sub())]],
        [[SequencedAdd(1, replace(msg(1), destination=sub().destination))], [remove(1)]],
    ),
}  # fmt: skip


def dump(index: Index) -> dict[str, object]:
    with index.env.begin() as txn:
        state: dict[str, object] = {
            name: [(bytes(k), bytes(v)) for k, v in txn.cursor(db=getattr(index, name))]
            for name in ("meta", "msgs", "qids", "tids", "subs", "pend", "files", "qseq")
        }
    state["totals"] = index.queue_totals()
    state["top"] = index.last_seq()
    return state


def built(
    path: Path,
    before: list[list[JournalOp]],
    run: list[list[JournalOp]],
    fast: bool,
    new_file_at: int = 0,
):
    """The index after ``before`` then ``run``; from record ``new_file_at`` on (counting
    from 1; 0: never) the records lie in a second data file."""
    index = Index(str(path))
    records = [
        (Location(2 if 0 < new_file_at <= i else 1, 100 * i), ops)
        for i, ops in enumerate(before + run, start=1)
    ]
    with index.env.begin(write=True) as txn:
        for location, ops in records[: len(before)]:
            index.note_file(txn, location.file_id)
            index.apply(txn, ops, location)
    with index.env.begin(write=True) as txn:
        if fast:
            index.apply_records(txn, records[len(before) :])
        else:
            for location, ops in records[len(before) :]:
                index.note_file(txn, location.file_id)
                index.apply(txn, ops, location)
    return index


@pytest.mark.parametrize(
    "new_file_at", [0, 2, 3], ids=["one file", "file 2 from 2", "file 2 from 3"]
)
@pytest.mark.parametrize("case", CASES)
def test_applying_a_run_at_once_gives_the_index_applying_each_gives(
    tmp_path: Path, case: str, new_file_at: int
) -> None:
    before, run = CASES[case]
    one_by_one = built(tmp_path / "each", before, run, fast=False, new_file_at=new_file_at)
    at_once = built(tmp_path / "run", before, run, fast=True, new_file_at=new_file_at)
    try:
        assert dump(at_once) == dump(one_by_one)
    finally:
        one_by_one.env.close()
        at_once.env.close()


def test_what_the_shortcut_leaves_out() -> None:
    def left_out(run: list[list[JournalOp]], indexed_top: int = 0) -> list[int]:
        records = [(Location(1, i), ops) for i, ops in enumerate(run)]
        return sorted(add.seq for add, _ in passing_through(records, indexed_top))

    assert left_out(CASES["consumed, one left"][1]) == [1, 2]
    assert left_out(CASES["consumed then sent again"][1]) == [1]
    assert left_out(CASES["redelivery counted in between"][1]) == []
    assert left_out(CASES["queue removed in between"][1]) == []
    assert left_out(CASES["the same id sent twice"][1]) == []
    assert left_out(CASES["the same id sent three times"][1]) == []
    assert left_out(CASES["a stored message moved and consumed"][1], indexed_top=1) == []
    assert left_out(CASES["topic messages go their own way"][1]) == []


def test_each_file_counts_its_live_things_and_their_bytes(tmp_path: Path) -> None:
    # What compaction reads to tell a few live messages (worth moving) from a file they fill.
    big = SequencedAdd(3, replace(msg(3), body=b"x" * 5000))
    before: list[list[JournalOp]] = [[A1, A2, big, AddSubscription(sub())]]
    run: list[list[JournalOp]] = [[MOVED], [remove(2)]]  # in file 2
    for fast in (False, True):
        index = built(tmp_path / str(fast), before, run, fast=fast, new_file_at=2)
        try:
            # file 1: A1 moved away, A2 consumed; the big one and the subscription (no bytes)
            assert index.live_counts() == {1: (2, big.message.size), 2: (1, msg(1).size)}
        finally:
            index.env.close()
