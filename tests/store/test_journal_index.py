"""The index's shortcut for messages sent and consumed between two catch-ups: applying a run
of records with ``apply_records`` (adds and removals that cancel out left out) must leave
the index exactly as applying every record in order does, in every named database, the
queue totals and the highest seq included."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from contract import Q, msg, sub

from dovecote.core.destinations import Destination, DestinationType, queue
from dovecote.store.api import (
    AddSubscription,
    RemoveDestination,
    RemoveMessage,
    UpdateRedelivery,
)
from dovecote.store.journal.datafiles import Location
from dovecote.store.journal.index import Index
from dovecote.store.journal.records import JournalOp, PassingThrough, SequencedAdd

Q2 = queue("other")
TEMP = Destination(DestinationType.TEMP_QUEUE, "ID:a-client-1:1")
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
    "another queue removed in between": ([], [[A1, A2], [RemoveDestination(Q2)], [remove(1)]]),
    "a temporary queue removed in between": (
        [], [[A1, A2], [RemoveDestination(TEMP)], [remove(1), remove(2)]]
    ),
    "queue removed, then sent to again": (
        [], [[A1], [RemoveDestination(Q)], [A2, A3], [remove(2), remove(1)]]
    ),
    "one of two queues removed": (
        [], [[A1, SequencedAdd(2, msg(2, Q2))], [RemoveDestination(Q2)],
             [remove(1), remove(2, Q2)]]
    ),
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
        finder = PassingThrough(indexed_top)
        for ops in run:
            finder.feed(ops)
        return sorted(add.seq for add, _ in finder.pairs)

    assert left_out(CASES["consumed, one left"][1]) == [1, 2]
    assert left_out(CASES["consumed then sent again"][1]) == [1]
    assert left_out(CASES["redelivery counted in between"][1]) == []
    assert left_out(CASES["queue removed in between"][1]) == []
    # Only its own queue's: a client's temporary queue goes whenever it disconnects.
    assert left_out(CASES["another queue removed in between"][1]) == [1]
    assert left_out(CASES["a temporary queue removed in between"][1]) == [1, 2]
    assert left_out(CASES["queue removed, then sent to again"][1]) == [2]
    assert left_out(CASES["one of two queues removed"][1]) == [1]
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


def test_new_queue_messages_added_together_index_as_added_one_by_one(tmp_path: Path) -> None:
    """A run of adds above every indexed seq (a transaction's sends) is written to the index
    in one go; with the highest seq set above them (each add then takes the path that looks
    for an entry to move), the same records must leave the same index."""
    topic_add = SequencedAdd(5, replace(msg(5), destination=sub().destination))
    records: list[list[JournalOp]] = [
        [SequencedAdd(1, msg(1)), SequencedAdd(2, msg(2, Q2)), SequencedAdd(3, msg(3)),
         SequencedAdd(4, replace(msg(1), body=b"the same id again", sequence=9)),
         topic_add, SequencedAdd(6, replace(msg(6), priority=9, expiration=5, sequence=7)),
         remove(3), SequencedAdd(8, msg(8)), SequencedAdd(7, msg(7, Q2))],
        [SequencedAdd(9, msg(9)), UpdateRedelivery(Q, msg(9).message_id, 3),
         SequencedAdd(10, msg(10, Q2))],
    ]  # fmt: skip

    def applied(path: Path, top: int) -> Index:
        index = Index(str(path))
        with index.env.begin(write=True) as txn:
            index.apply(txn, [AddSubscription(sub())], Location(1, 0))
            txn.put(b"seq", top.to_bytes(8, "big"), db=index.meta)
        for i, ops in enumerate(records, start=1):
            txn = index.begin()
            index.note_file(txn, i)
            index.apply(txn, ops, Location(i, 100))
            index.commit(txn)
        return index

    together = applied(tmp_path / "together", 0)
    one_by_one = applied(tmp_path / "each", 1000)
    try:
        expected, got = dump(one_by_one), dump(together)
        assert got["top"] == 10 and expected["top"] == 1000
        for state in (expected, got):
            state.pop("top")
            state["meta"] = [(k, v) for k, v in state["meta"] if k != b"seq"]  # type: ignore[attr-defined]
        assert got == expected
        assert together.queue_count(str(Q)) == 5 and together.queue_count(str(Q2)) == 3
        # The layout itself (the module's docstring): an entry, the id's key, the order.
        six = replace(msg(6), priority=9, expiration=5, sequence=7)
        assert dict(together.messages())[6] == [
            str(Q),
            six.message_id,
            1,
            100,
            0,
            -1,
            9,
            5,
            7,
            six.size,
        ]
        with together.env.begin() as txn:
            assert txn.get(f"{Q}\0{msg(1).message_id}".encode(), db=together.qids) == bytes(
                [0] * 7 + [4]
            )  # the later of the two seqs given that id
        order = [seq for _, seq, _ in together.queue_page(str(Q), (0, 0), 10)]
        assert order == sorted(order, key=lambda seq: (dict(together.messages())[seq][8], seq))
        assert sorted(order) == [1, 4, 6, 8, 9]
    finally:
        together.env.close()
        one_by_one.env.close()


def test_removing_a_queues_messages_one_by_one_leaves_what_removing_the_queue_does(
    tmp_path: Path,
) -> None:
    """Removals come in runs (a stream commit's), applied a run at a time: they must leave
    the index as the other way of dropping messages (a destination's removal) does."""
    topic_add = SequencedAdd(3, replace(msg(3), destination=sub().destination))
    stored: list[JournalOp] = [
        AddSubscription(sub()), A1, SequencedAdd(2, msg(2, Q2)), topic_add,
        SequencedAdd(4, msg(4)), SequencedAdd(5, replace(msg(5), sequence=3)),
    ]  # fmt: skip

    def emptied(path: Path, ops: list[JournalOp]) -> Index:
        index = Index(str(path))
        for i, record in enumerate([stored, ops], start=1):
            txn = index.begin()
            index.note_file(txn, i)
            index.apply(txn, record, Location(i, 0))
            index.commit(txn)
        return index

    one_by_one = emptied(tmp_path / "each", [remove(5), remove(9), remove(1), remove(4)])
    whole = emptied(tmp_path / "whole", [RemoveDestination(Q)])
    try:
        assert dump(one_by_one) == dump(whole)
        assert one_by_one.queue_count(str(Q)) == 0 and one_by_one.queue_count(str(Q2)) == 1
        assert one_by_one.live_counts() == {1: (3, msg(2, Q2).size + msg(3).size), 2: (0, 0)}
    finally:
        one_by_one.env.close()
        whole.env.close()


_ENCODE_AND_INDEX = """
import gc, sys
from dovecote.core.destinations import Destination, DestinationType, queue
from dovecote.core.message import Message
from dovecote.store.journal.datafiles import Location
from dovecote.store.journal.index import Index
from dovecote.store.journal.records import BatchEncoder, SequencedAdd

adds = [SequencedAdd(i, Message(f"ID:p:1:1:{i}", queue("orders"), b"body", persistent=True,
                                sequence=i)) for i in range(1, 5001)]
index = Index(sys.argv[1])
started = []
gc.collect()
gc.callbacks.append(lambda phase, info: phase == "start" and started.append(info))
_, payload = BatchEncoder().parts(adds)
txn = index.begin()
index.apply_records(txn, [(Location(1, 0), adds)])
index.commit(txn)
print(len(started), len(payload), index.queue_count("queue://orders"))
"""


def test_a_batch_is_encoded_and_indexed_without_a_collection(tmp_path: Path) -> None:
    """Encoding a commit's adds for the journal and making their index entries builds a few
    containers per message that die right after: a collection in the middle (one every 700
    allocations by default) would only walk them and move them to an older generation. (In
    a process of its own: no other thread's allocations.)"""
    out = subprocess.run(
        [sys.executable, "-c", _ENCODE_AND_INDEX, str(tmp_path / "index")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    collections, payload, indexed = (int(x) for x in out.split())
    assert payload > 5000 and indexed == 5000
    # (Some entries outlive the index's work, and may set off one collection after it.)
    assert collections <= 1  # 42 when collections could run inside
