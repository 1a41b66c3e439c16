"""The streaming reader's requests, in the order it makes them (a stub stream client in
place of the broker): what the driver asks between two batches, and when it removes a
batch Spark has committed."""

from __future__ import annotations

import threading
import time
from typing import Any

from pyspark.sql.streaming.datasource import ReadMaxRows

from dovecote.client.streams import Plan
from dovecote.spark.source import SCHEMA, DovecoteStreamReader

HELD = 30
"""The stub's queue: sequences 1 to 30."""


class StubStream:
    """Plans over sequences 1..HELD; logs each request with what the reader had committed
    when it was made."""

    def __init__(self, reader: DovecoteStreamReader, log: list[tuple[Any, ...]]) -> None:
        self.reader = reader
        self.log = log
        self.removed = threading.Event()
        self.prepared: list[int] = []
        """Where the plans asking the broker to prepare their blocks start."""

    def plan(
        self,
        after: int,
        max_messages: int = 0,
        up_to: int | None = None,
        splits: int = 1,
        prepare: bool = False,
    ) -> Plan:
        self.log.append(("plan", after, self.reader._committed))
        if prepare:
            self.prepared.append(after)
        top = min(HELD, up_to if up_to is not None else HELD)
        end = min(top, after + max_messages) if max_messages else top
        cut = after + (end - after) // 2
        return Plan(end, end - after, [after, cut, end] if splits == 2 else [after, end])

    def commit(self, up_to: int) -> int:
        time.sleep(0.05)  # (the broker's durable write)
        self.log.append(("commit", up_to))
        self.removed.set()
        return up_to

    def close(self) -> None:
        pass


def reader_with_stub() -> tuple[DovecoteStreamReader, StubStream, list[tuple[Any, ...]]]:
    options = {"destination": "orders", "numPartitions": "2", "maxMessagesPerBatch": "10"}
    reader = DovecoteStreamReader(options, SCHEMA)
    log: list[tuple[Any, ...]] = []
    stub = StubStream(reader, log)
    reader._new_client = lambda: stub  # type: ignore[method-assign]
    return reader, stub, log


def test_available_now_plans_once_at_the_start_then_once_a_batch() -> None:
    reader, stub, log = reader_with_stub()
    reader.prepareForTriggerAvailableNow()
    assert reader.initialOffset() == {"sequence": 0}
    assert reader.initialOffset() == {"sequence": 0}  # (Spark asks twice)
    assert log == [("plan", 0, 0)]  # the target, which also made the queue
    limit = reader.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows)
    assert reader.latestOffset({"sequence": 0}, limit) == {"sequence": 10}
    assert [p.up_to for p in reader.partitions({"sequence": 0}, {"sequence": 10})] == [5, 10]
    assert log == [("plan", 0, 0), ("plan", 0, 0)]  # partitions() took latestOffset's plan
    # Only the batch's plan has its blocks prepared: the target's is not read as planned.
    assert stub.prepared == [0]
    reader.stop()


def test_the_next_batch_is_planned_before_the_last_one_is_removed() -> None:
    """The plan goes to the broker first (it needs nothing of the removal, and Spark waits
    for it); the removal follows without being waited for."""
    reader, _, log = reader_with_stub()
    limit = ReadMaxRows(10)
    reader.latestOffset({"sequence": 0}, limit)
    assert reader.latestOffset({"sequence": 10}, limit) == {"sequence": 20}
    assert ("plan", 10, 0) in log  # planned while batch 1 was not yet being removed
    assert reader._committed == 10
    reader.stop()  # waits for the removal
    assert log[-1] == ("commit", 10)


def test_the_last_batch_is_removed_before_the_query_hears_there_is_nothing_more() -> None:
    reader, stub, log = reader_with_stub()
    reader.prepareForTriggerAvailableNow()
    limit = ReadMaxRows(30)
    assert reader.latestOffset({"sequence": 0}, limit) == {"sequence": 30}
    assert reader.latestOffset({"sequence": 30}, limit) == {"sequence": 30}
    assert stub.removed.is_set() and log[-1] == ("commit", 30)
    reader.stop()
