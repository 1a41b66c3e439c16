"""The Spark source's batches on local Spark with a real broker process (issue 32):
trigger(availableNow=True) cuts the backlog into batches of at most maxMessagesPerBatch and
leaves nothing it read on the broker once the query ends; rows come out whole and in order
through the columnar read path."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers import BrokerProcess, running_broker
from dovecote.client import ConnectionFactory, Message
from dovecote.client.streams import StreamClient
from dovecote.core.destinations import queue
from spark.sessions import shared_session

LONG = bool(os.environ.get("DOVECOTE_LONG"))


@pytest.fixture(scope="module")
def spark() -> Any:
    return shared_session()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(workdir=tmp_path_factory.mktemp("batches-broker")) as process:
        yield process


def url_of(broker: BrokerProcess) -> str:
    return f"tcp://127.0.0.1:{broker.openwire_port}"


def send(url: str, name: str, count: int) -> None:
    with ConnectionFactory(url).create_connection() as connection:
        producer = connection.create_session().create_producer(queue(name))
        for i in range(count):
            producer.send(Message(f"order-{i}", properties={"n": i, "kind": "a" if i % 2 else "b"}))


def backlog(broker: BrokerProcess, prefix: str, count: int) -> tuple[str, str]:
    """A new queue holding ``count`` messages: (url, name)."""
    url, name = url_of(broker), f"{prefix}.{uuid.uuid4().hex[:8]}"
    send(url, name, count)
    return url, name


def batch_sizes(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def left_on_broker(url: str, name: str) -> int:
    with StreamClient(url, queue(name)) as stream:
        return stream.plan(after=0).count


def run_available_now(spark: Any, url: str, name: str, sink: Path, **options: str) -> Any:
    reader = spark.readStream.format("dovecote").option("url", url).option("destination", name)
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load().writeStream.format("parquet").option("path", str(sink))
        .option("checkpointLocation", str(sink.parent / f"{sink.name}-checkpoint"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination(240)
    assert not query.isActive and query.exception() is None
    return query


@pytest.mark.timeout(300)
def test_available_now_keeps_to_max_messages_per_batch_and_leaves_nothing(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    total, most = (700, 200) if LONG else (250, 100)
    url, name = backlog(broker, "backlog", total)
    query = run_available_now(spark, url, name, tmp_path / "sink",
                              maxMessagesPerBatch=str(most), numPartitions="2")  # fmt: skip
    full, rest = divmod(total, most)
    assert batch_sizes(query) == [most] * full + [rest]
    # What the query committed is gone from the broker once it has ended: no later call.
    assert left_on_broker(url, name) == 0
    rows = spark.read.parquet(str(tmp_path / "sink")).collect()
    assert sorted(r.text for r in rows) == sorted(f"order-{i}" for i in range(total))


@pytest.mark.timeout(300)
def test_available_now_stops_at_what_was_there_when_it_started(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """A second availableNow run reads only what arrived since the first one."""
    url, name = backlog(broker, "later", 150)
    run_available_now(spark, url, name, tmp_path / "sink", maxMessagesPerBatch="100")
    assert left_on_broker(url, name) == 0
    send(url, name, 30)
    query = run_available_now(spark, url, name, tmp_path / "sink", maxMessagesPerBatch="100")
    assert batch_sizes(query) == [30]
    assert left_on_broker(url, name) == 0
    assert spark.read.parquet(str(tmp_path / "sink")).count() == 180
