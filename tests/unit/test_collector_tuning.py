"""The broker's collector settings (cli.tune_collector): a message's objects, freed by
reference counting once it is delivered, must not set off young collections while a batch
of them is in flight. Run in a child process: freezing the collector is for the life of a
process. And what a queue holds per message, for the collector to walk."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from dovecote.broker import transactions
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.regions import Regions
from dovecote.core.destinations import queue
from dovecote.core.message import Message
from dovecote.store.memory.adapter import MemoryPersistenceAdapter

HELD = queue("held")

CHILD = """
import gc, sys
from dovecote.cli import tune_collector
if sys.argv[1] == "tuned":
    tune_collector()
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info))
for batch in range(200):  # batches of 1,000 messages in flight, then delivered and freed
    in_flight = [({"destination": "/queue/a", "n": n}, [n, "id"]) for n in range(1_000)]
    in_flight.clear()
print(len(collections), gc.get_threshold()[0], len(gc.get_objects()))
"""


def _young_collections(mode: str) -> tuple[int, int, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    ).stdout
    count, threshold, tracked = (int(x) for x in out.split())
    return count, threshold, tracked


def test_messages_in_flight_set_off_no_young_collections() -> None:
    tuned, threshold, tracked_after_freeze = _young_collections("tuned")
    default, default_threshold, tracked = _young_collections("default")
    assert default >= 200  # the default: one every 700 allocations not yet freed
    assert tuned == 0
    assert threshold == 20_000 and default_threshold == 700
    # Start-up's objects were frozen: out of the collector's sight.
    assert tracked_after_freeze < tracked // 2


@pytest.mark.parametrize("persistent", [True, False])
def test_a_queues_entries_share_the_tuple_of_usages_they_are_charged_to(
    tmp_path: Path, persistent: bool
) -> None:
    """A held message is two objects for the collector to walk, its Message and its Entry:
    the usages its entry is charged to are one tuple for the queue's entries, not a tuple
    of each (a third of what every collection walked)."""
    regions = Regions(BrokerSettings(temp_directory=tmp_path / "tmp"), MemoryPersistenceAdapter())
    count = 5_000
    messages = [Message(f"m{i}", HELD, persistent=persistent) for i in range(count)]
    asyncio.run(regions.route(messages, sync=False))
    entries = list(regions.queue(HELD).pending_entries())
    assert len(entries) == count
    assert len({id(entry.charged) for entry in entries}) == 1
    assert entries[0].charged[0] is regions.paging.memory_usage(HELD)
    assert (regions.paging.usage.store in entries[0].charged) == persistent


LARGE_COMMIT = """
import asyncio, gc, sys
from pathlib import Path
from dovecote.broker import transactions
from dovecote.broker.connection import LocalTransaction
from dovecote.broker import transactions
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.regions import Regions
from dovecote.core.destinations import queue
from dovecote.core.ids import ConnectionId, TransactionId
from dovecote.core.message import Message
from dovecote.store.memory.adapter import MemoryPersistenceAdapter

count = int(sys.argv[2])
regions = Regions(BrokerSettings(temp_directory=Path(sys.argv[1])), MemoryPersistenceAdapter())
tx = LocalTransaction(TransactionId(ConnectionId("c"), "t"))
tx.sends.extend(Message(f"m{i}", queue("big"), persistent=True) for i in range(count))
collections = []
committing = [False]
gc.collect()
gc.callbacks.append(lambda phase, _: phase == "start" and committing[0] and collections.append(1))

async def main():
    committing[0] = True
    await transactions.commit(regions, tx)
    committing[0] = False

asyncio.run(main())
young = len(gc.get_objects(generation=0)) + len(gc.get_objects(generation=1))
print(len(collections), regions.queue(queue("big")).stats.enqueued, young)
"""


@pytest.mark.parametrize(
    "count", [transactions.LARGE_COMMIT_SENDS, transactions.LARGE_COMMIT_SENDS - 1]
)
def test_a_large_commit_runs_with_the_collector_paused(tmp_path: Path, count: int) -> None:
    """The objects a large transaction's sends make on their way to the store and their
    queue, most of them freed by the commit's end, are not walked by collections in the
    middle of it (one every 700 allocations by default), nor what lives on by young and
    middle collections after it; a small commit is left alone.
    (In a process of its own: the default thresholds, and no other thread's allocations.)"""
    out = subprocess.run(
        [sys.executable, "-c", LARGE_COMMIT, str(tmp_path), str(count)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    collections, enqueued, young = (int(x) for x in out.split())
    assert enqueued == count
    if count >= transactions.LARGE_COMMIT_SENDS:
        assert collections == 0  # 4 when collections could run inside
        # What the queue keeps (a message and an entry each) waits in the oldest generation,
        # for no young or middle collection to walk (2,000 objects young when not promoted).
        assert young < count // 4
    else:
        assert collections >= 1
