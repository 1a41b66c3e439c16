"""The Spark data source on local Spark with real broker processes (compatibility X1): exactly-once
streaming into Parquet across a killed driver and across a killed broker, order within a
partition, browse snapshots, and transactional writes that leave nothing half-sent when a
task fails."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers import BrokerProcess, running_broker
from dovecote.client import ConnectionFactory, Message
from dovecote.client.streams import StreamClient
from dovecote.core.destinations import queue
from ports import free_port
from spark.sessions import shared_session
from spark.sink import committed_batches, committed_rows

# Spark's Python workers must run this interpreter (the one with pyarrow and dovecote).
os.environ["PYSPARK_PYTHON"] = sys.executable

DRIVER = Path(__file__).parent.parent / "spark" / "driver.py"
WAIT_S = 180.0
LONG = bool(os.environ.get("DOVECOTE_LONG"))
BEFORE_KILL, AFTER_KILL = (600, 400) if LONG else (400, 200)
"""Messages sent before the kill and after it; the driver reads batches of 100 and is killed
after two (two more would have to finish before the kill for it not to be mid-stream)."""


def browse(url: str, name: str) -> list[Message]:
    with ConnectionFactory(url).create_connection() as connection:
        connection.start()
        return list(connection.create_session().browse(queue(name)))


def url_of(broker: BrokerProcess) -> str:
    return f"tcp://127.0.0.1:{broker.openwire_port}"


def send_numbered(url: str, name: str, first: int, last: int) -> None:
    with ConnectionFactory(url + "?jms.useAsyncSend=true").create_connection() as connection:
        producer = connection.create_session().create_producer(queue(name))
        for i in range(first, last):
            producer.send(Message(f"order-{i}", properties={"n": i}))
        # One synchronous send at the end: everything before it has reached the broker.
        connection.create_session().create_producer(queue(name + ".sync")).send(Message("x"))


def until(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


class Driver:
    def __init__(self, url: str, name: str, sink: Path, checkpoint: Path) -> None:
        self.log = sink.parent / f"driver-{time.monotonic_ns()}.log"
        self.process = subprocess.Popen(
            [sys.executable, str(DRIVER), url, f"queue://{name}", str(sink), str(checkpoint)],
            stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent)),
        )  # fmt: skip

    def alive(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"driver died:\n{self.log.read_text()[-3000:]}")
        return True

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()


def assert_exactly_once(sink: Path, total: int) -> None:
    rows = committed_rows(sink)
    bodies = sorted(r["text"] for r in rows)
    assert len(rows) == total, f"{len(rows)} rows for {total} messages"
    assert bodies == sorted(f"order-{i}" for i in range(total))
    assert len({r["message_id"] for r in rows}) == total
    # Order within a partition: each file of a batch holds one partition's range in order.
    by_file: dict[str, list[int]] = {}
    for r in rows:
        by_file.setdefault(r["_file"], []).append(r["sequence"])
    for sequences in by_file.values():
        assert sequences == sorted(sequences)


def drained(url: str, name: str) -> Callable[[], bool]:
    def check() -> bool:
        with StreamClient(url, queue(name)) as stream:
            return stream.plan(after=0).count == 0

    return check


@pytest.mark.timeout(600)
def test_exactly_once_across_a_killed_driver(tmp_path: Path) -> None:
    name = f"orders.{uuid.uuid4().hex[:8]}"
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    with running_broker(workdir=tmp_path) as broker:
        url = url_of(broker)
        total = BEFORE_KILL + AFTER_KILL
        send_numbered(url, name, 0, BEFORE_KILL)
        driver = Driver(url, name, sink, checkpoint)
        try:
            until(lambda: driver.alive() and committed_batches(sink) >= 2, "two batches")
            driver.kill()  # kill -9 mid-stream
            assert len(committed_rows(sink)) < BEFORE_KILL
            send_numbered(url, name, BEFORE_KILL, total)
            driver = Driver(url, name, sink, checkpoint)
            until(lambda: driver.alive() and len(committed_rows(sink)) >= total, "every row")
            until(drained(url, name), "the broker to have the committed batches removed")
        finally:
            driver.stop()
        assert_exactly_once(sink, total)


@pytest.mark.timeout(600)
def test_exactly_once_across_a_killed_broker(tmp_path: Path) -> None:
    name = f"orders.{uuid.uuid4().hex[:8]}"
    sink, checkpoint, store = tmp_path / "sink", tmp_path / "checkpoint", tmp_path / "broker"
    store.mkdir()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    driver: Driver | None = None
    try:
        with running_broker(workdir=store, openwire_port=port) as broker:
            send_numbered(url, name, 0, BEFORE_KILL)
            driver = Driver(url, name, sink, checkpoint)
            until(lambda: driver.alive() and committed_batches(sink) >= 2, "two batches")
            broker.process.kill()  # kill -9 the broker mid-stream
            broker.process.wait()
            # Restart only once the query has met the dead broker (and is retrying).
            until(lambda: "stream request failed" in driver.log.read_text(errors="replace"),
                  "the driver to notice the broker is gone")  # fmt: skip
        with running_broker(workdir=store, openwire_port=port):
            send_numbered(url, name, BEFORE_KILL, BEFORE_KILL + AFTER_KILL)
            until(lambda: driver.alive() and len(committed_rows(sink)) >= BEFORE_KILL + AFTER_KILL,
                  "every row")  # fmt: skip
            until(drained(url, name), "the broker to have the committed batches removed")
    finally:
        if driver is not None:
            driver.stop()
    assert_exactly_once(sink, BEFORE_KILL + AFTER_KILL)


@pytest.fixture(scope="module")
def spark() -> Any:
    return shared_session()  # local[2,2]: a failed task is tried once more


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(workdir=tmp_path_factory.mktemp("spark-broker")) as process:
        yield process


def test_batch_read_is_a_browse_snapshot(spark: Any, broker: BrokerProcess) -> None:
    name = f"snapshot.{uuid.uuid4().hex[:8]}"
    send_numbered(url_of(broker), name, 0, 25)
    df = spark.read.format("dovecote").option("url", url_of(broker)).option(
        "destination", name).load()  # fmt: skip
    rows = df.select("text", "properties", "destination", "priority").collect()
    assert sorted(r.text for r in rows) == sorted(f"order-{i}" for i in range(25))
    assert rows[0].destination == f"queue://{name}" and rows[0].priority == 4
    assert rows[0].properties["n"] == rows[0].text.removeprefix("order-")
    # A snapshot consumes nothing.
    assert df.count() == 25


def test_batch_write_sends_rows_as_messages(spark: Any, broker: BrokerProcess) -> None:
    name = f"written.{uuid.uuid4().hex[:8]}"
    df = spark.createDataFrame([(f"row-{i}", i % 3) for i in range(40)], "text string, kind int")
    (df.repartition(2).write.format("dovecote").mode("append").option("url", url_of(broker))
       .option("destination", name).option("propertyColumns", "kind")
       .option("priority", "7").save())  # fmt: skip
    got = browse(url_of(broker), name)
    assert sorted(m.body for m in got) == sorted(f"row-{i}" for i in range(40))  # type: ignore[type-var]
    assert {m.priority for m in got} == {7}
    assert all(m.properties["kind"] == int(str(m.body)[4:]) % 3 for m in got)


def test_batch_write_goes_to_a_dovecote_broker_as_append_blocks(
    spark: Any, broker: BrokerProcess
) -> None:
    """Rows with string property columns reach a dovecote broker in Append requests (a few
    blocks per partition, their messages from the connection's session 0, which no producer
    of a client has), as the same messages a send per row gives: text or bytes bodies,
    string properties where not null, the correlation id, persistent, the priority asked."""
    name = f"appended.{uuid.uuid4().hex[:8]}"
    rows = [(f"row-{i}" if i % 4 else None, f"b{i}".encode(), f"r{i % 3}" if i % 5 else None,
             f"c{i}") for i in range(300)]  # fmt: skip
    df = spark.createDataFrame(
        rows, "text string, body binary, region string, correlation_id string"
    )
    (df.repartition(2).write.format("dovecote").mode("append").option("url", url_of(broker))
       .option("destination", name).option("propertyColumns", "region")
       .option("priority", "6").save())  # fmt: skip
    got = {m.correlation_id: m for m in browse(url_of(broker), name)}
    assert len(got) == 300
    for i in range(300):
        m = got[f"c{i}"]
        assert m.body == (f"row-{i}" if i % 4 else f"b{i}".encode())
        assert m.properties.get("region") == (f"r{i % 3}" if i % 5 else None)
        assert m.priority == 6 and m.persistent
        assert m.message_id.split(":")[-3] == "0"  # the Append path's session 0


def test_a_failed_write_task_leaves_no_partial_batch(spark: Any, broker: BrokerProcess) -> None:
    """Partition 1 fails after sending 10 of its rows; its transaction rolls back, the retry
    sends them all: every row arrives exactly once, none from the failed attempt."""
    name = f"retried.{uuid.uuid4().hex[:8]}"

    # Nested, so that Spark pickles it by value for its Python workers.
    def fail_first_attempt_midway(index: int, rows: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        context = TaskContext.get()
        for n, row in enumerate(rows):
            if index == 1 and n == 10 and context is not None and context.attemptNumber() == 0:
                raise RuntimeError("injected task failure after 10 rows")
            yield row

    rows = spark.sparkContext.parallelize([(f"row-{i}",) for i in range(60)], 2)
    failing = spark.createDataFrame(rows.mapPartitionsWithIndex(fail_first_attempt_midway),
                                    "text string")  # fmt: skip
    failing.write.format("dovecote").mode("append").option("url", url_of(broker)).option(
        "destination", name).save()  # fmt: skip
    got = [m.body for m in browse(url_of(broker), name)]
    assert sorted(got) == sorted(f"row-{i}" for i in range(60))  # type: ignore[type-var]


def test_a_write_job_that_fails_sends_nothing_from_the_failed_partition(
    spark: Any, broker: BrokerProcess
) -> None:
    """The writer itself fails in partition 1 after sending 5 rows (a row with nothing to
    send): that partition's transaction rolls back, on every attempt; partition 0's stays."""
    name = f"failed.{uuid.uuid4().hex[:8]}"
    texts = [f"row-{i}" if i != 15 else None for i in range(20)]
    rows = spark.sparkContext.parallelize([(t,) for t in texts], 2)
    failing = spark.createDataFrame(rows, "text string")
    with pytest.raises(Exception, match="needs a text, body or value column"):
        failing.write.format("dovecote").mode("append").option("url", url_of(broker)).option(
            "destination", name).save()  # fmt: skip
    got = [m.body for m in browse(url_of(broker), name)]
    assert sorted(got) == sorted(f"row-{i}" for i in range(10))  # type: ignore[type-var]


def test_stream_from_a_queue_into_another(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """readStream and writeStream together: every message moves once, none is left behind."""
    source, target = f"in.{uuid.uuid4().hex[:8]}", f"out.{uuid.uuid4().hex[:8]}"
    url = url_of(broker)
    send_numbered(url, source, 0, 120)
    query = (
        spark.readStream.format("dovecote").option("url", url).option("destination", source)
        .option("maxMessagesPerBatch", "50").load().select("text")
        .writeStream.format("dovecote").option("url", url).option("destination", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds").start()
    )  # fmt: skip
    try:
        until(lambda: len(browse(url, target)) >= 120, "120 messages on the target")
        until(drained(url, source), "the source to be drained")
    finally:
        query.stop()
    got = [m.body for m in browse(url, target)]
    assert sorted(got) == sorted(f"order-{i}" for i in range(120))  # type: ignore[type-var]


def test_stream_from_a_topic_through_a_durable_subscription(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """A topic is read through a durable subscription the query creates at its start:
    what is published afterwards reaches the sink once, and the subscription is drained."""
    from dovecote.core.destinations import topic

    name = f"news.{uuid.uuid4().hex[:8]}"
    url = url_of(broker)
    sink = tmp_path / "sink"
    query = (
        spark.readStream.format("dovecote").option("url", url)
        .option("destination", f"topic://{name}").option("clientId", "spark-test")
        .option("subscriptionName", name).load()
        .writeStream.format("parquet").option("path", str(sink))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds").start()
    )  # fmt: skip
    try:
        with StreamClient(url, topic(name), "spark-test", name) as stream:
            until(lambda: stream.plan(after=0).count == 0 and query.isActive, "the subscription")
            with ConnectionFactory(url).create_connection() as connection:
                producer = connection.create_session().create_producer(topic(name))
                for i in range(30):
                    producer.send(Message(f"order-{i}"))
            until(lambda: len(committed_rows(sink)) >= 30, "30 rows")
            until(lambda: stream.plan(after=0).count == 0, "the subscription to be drained")
    finally:
        query.stop()
    rows = committed_rows(sink)
    assert sorted(r["text"] for r in rows) == sorted(f"order-{i}" for i in range(30))
    assert {r["destination"] for r in rows} == {f"topic://{name}"}
