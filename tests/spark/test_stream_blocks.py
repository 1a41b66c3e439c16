"""The columnar read path (issue 32) against a real broker process, without Spark: a range
read as stream blocks (``Blocks``) and turned into Arrow record batches holds the same rows,
value for value, as the same range read message by message (``Range``) through the client;
blocks are cut by size and a range is not consumed by reading it."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from brokers import BrokerProcess, running_broker
from differ import Peers
from dovecote.client import ConnectionFactory, Message
from dovecote.client.streams import StreamClient
from dovecote.core.destinations import Destination, queue
from dovecote.spark.blocks import record_batch
from dovecote.spark.source import SCHEMA, to_row
from pagefaults import BLOCK_PAGES, faults_per_block

FIELDS = SCHEMA.fieldNames()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(workdir=tmp_path_factory.mktemp("blocks-broker")) as process:
        yield process


def arrow_schema() -> pa.Schema:
    return to_arrow_schema(SCHEMA, timezone="UTC")


def send_variety(url: str, name: str) -> int:
    """Every kind of body and header a row carries; returns how many messages were sent."""
    reply_to: Destination = queue("answers")
    messages = [
        Message("plain text", properties={"n": 1, "flag": True, "ratio": 0.5, "who": "ada"}),
        Message("ünïcödé ✓", correlation_id="c-1", type="order", reply_to=reply_to),
        Message(b"\x00\x01binary\xff", properties={"raw": b"\x01"}),
        Message({"a": 1, "b": "two"}),
        Message([1, "two", 3.0]),
        Message(""),
        Message(b""),
        Message("x" * 5000, properties={"big": "yes"}),
    ]
    with ConnectionFactory(url).create_connection() as connection:
        producer = connection.create_session().create_producer(queue(name))
        for i, message in enumerate(messages):
            producer.send(message, priority=i % 10, time_to_live=3_600_000 if i == 1 else 0,
                          persistent=i != 2)  # fmt: skip
    return len(messages)


def rows_by_message(url: str, name: str) -> list[tuple[Any, ...]]:
    with StreamClient(url, queue(name)) as stream:
        plan = stream.plan(after=0)
        return [to_row(m, queue(name)) for m in stream.read(0, plan.end)]


def rows_by_block(url: str, name: str, block_bytes: int = 0) -> tuple[int, list[tuple[Any, ...]]]:
    schema = arrow_schema()
    with StreamClient(url, queue(name)) as stream:
        plan = stream.plan(after=0)
        blocks = stream.read_blocks(0, plan.end, block_bytes)
    rows = []
    for block in blocks:
        batch = record_batch(block, schema)
        assert batch.schema.equals(schema)
        batch.validate(full=True)
        for row in batch.to_pylist():
            rows.append(tuple(row[f] for f in FIELDS))
    return len(blocks), rows


def comparable(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Arrow gives maps as lists of pairs."""
    values = list(row)
    props = values[FIELDS.index("properties")]
    values[FIELDS.index("properties")] = dict(props) if isinstance(props, list) else props
    return tuple(values)


def test_blocks_hold_the_same_rows_as_messages_one_by_one(broker: BrokerProcess) -> None:
    url, name = f"tcp://127.0.0.1:{broker.openwire_port}", f"blocks.{uuid.uuid4().hex[:8]}"
    sent = send_variety(url, name)
    one_by_one = [comparable(r) for r in rows_by_message(url, name)]
    count, blocked = rows_by_block(url, name)
    assert count == 1 and len(one_by_one) == sent
    assert [comparable(r) for r in blocked] == one_by_one
    # Reading consumed nothing; small blocks cut the same range into several, same rows.
    count, small = rows_by_block(url, name, block_bytes=100)
    assert count >= 3
    assert [comparable(r) for r in small] == one_by_one


def test_an_empty_range_is_no_block(broker: BrokerProcess) -> None:
    url = f"tcp://127.0.0.1:{broker.openwire_port}"
    with StreamClient(url, queue(f"empty.{uuid.uuid4().hex[:8]}")) as stream:
        assert stream.read_blocks(0, 10**18) == []


def test_a_block_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="not a dovecote stream block"):
        record_batch(b"XXXX" + bytes(12), pa.schema([]))


def test_requests_share_one_reply_queue_and_an_abandoned_read_leaves_nothing(
    broker: BrokerProcess,
) -> None:
    """A client's requests are answered on one reply queue made at its first request (no
    round trip to make and remove a queue per request); a read left unfinished takes its
    queue, with the answers still to come, away with it, and the next request is answered
    right."""
    url, name = f"tcp://127.0.0.1:{broker.openwire_port}", f"shared.{uuid.uuid4().hex[:8]}"
    sent = send_variety(url, name)
    with StreamClient(url, queue(name)) as stream:
        plan = stream.plan(after=0)
        assert stream.connection is not None
        transport = stream.connection.transport
        before = transport.round_trips
        assert stream.plan(after=0) == plan
        assert len(stream.read_blocks(0, plan.end)) == 1
        assert transport.round_trips == before
        blocks = stream.iter_blocks(0, plan.end, block_bytes=100)
        next(blocks)
        blocks.close()  # the other blocks are on their way
        assert stream.plan(after=0) == plan
        batches = [record_batch(b, arrow_schema()) for b in stream.read_blocks(0, plan.end)]
        assert sum(b.num_rows for b in batches) == sent


def test_an_executor_keeps_its_connection_for_its_next_task(broker: BrokerProcess) -> None:
    """Spark reuses its Python workers: a read finished leaves its connection for the next
    one, whatever destination that one reads (another query's); a read left unfinished
    closes its own."""
    from dovecote.spark.source import _IDLE_CLIENTS, DovecoteStreamReader, SequenceRange

    url, name = f"tcp://127.0.0.1:{broker.openwire_port}", f"pooled.{uuid.uuid4().hex[:8]}"
    sent = send_variety(url, name)
    reader = DovecoteStreamReader({"url": url, "destination": name}, SCHEMA)
    part = SequenceRange(0, reader._stream().plan(after=0).end)
    key = url

    def read_all() -> int:
        return sum(batch.num_rows for batch in reader.read(part))

    assert read_all() == sent
    (client,) = _IDLE_CLIENTS.idle(key)
    assert read_all() == sent
    assert _IDLE_CLIENTS.idle(key) == [client]
    other = DovecoteStreamReader({"url": url, "destination": f"{name}.other"}, SCHEMA)
    send_variety(url, f"{name}.other")
    other_part = SequenceRange(0, other._stream().plan(after=0).end)
    rows = [row for batch in other.read(other_part) for row in batch.to_pylist()]
    assert {row["destination"] for row in rows} == {f"queue://{name}.other"}
    assert len(rows) == sent and _IDLE_CLIENTS.idle(key) == [client]
    back = {row["destination"] for batch in reader.read(part) for row in batch.to_pylist()}
    assert back == {f"queue://{name}"} and _IDLE_CLIENTS.idle(key) == [client]
    other.stop()
    unfinished = reader.read(part)
    next(unfinished)
    assert _IDLE_CLIENTS.idle(key) == []  # in use
    unfinished.close()
    assert _IDLE_CLIENTS.idle(key) == [] and client.connection is not None
    assert client.connection.transport.closed
    reader.stop()


def test_a_starting_query_plans_once_for_its_initial_offset(
    broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark asks a starting query's reader for its initial offset twice; one plan (the
    round trip that creates a durable subscription) answers both."""
    from dovecote.spark.source import DovecoteStreamReader

    url = f"tcp://127.0.0.1:{broker.openwire_port}"
    reader = DovecoteStreamReader({"url": url, "destination": "initial.once"}, SCHEMA)
    plans: list[int] = []
    real_plan = StreamClient.plan

    def counted(self: StreamClient, *args: Any, **kwargs: Any) -> Any:
        plans.append(1)
        return real_plan(self, *args, **kwargs)

    monkeypatch.setattr(StreamClient, "plan", counted)
    assert reader.initialOffset() == reader.initialOffset() == {"sequence": 0}
    assert len(plans) == 1
    reader.stop()


def test_the_driver_side_reader_does_not_import_what_only_writes_need() -> None:
    """A streaming query's start waits for Spark's reader process to import the source:
    pyarrow.compute (only writes use it) is not imported with it."""
    code = (
        "import sys, pyspark.sql.streaming.python_streaming_source_runner, dovecote.spark.source;"
        "print('pyarrow.compute' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _texts(first: int, count: int, **columns: list[Any]) -> pa.RecordBatch:
    texts = pa.array([f"row-{i}" for i in range(first, first + count)])
    extra = {name: pa.array(values) for name, values in columns.items()}
    return pa.RecordBatch.from_arrays([texts, *extra.values()], names=["text", *extra])


@pytest.mark.parametrize("kind", ["appended", "sent"])
def test_an_executor_keeps_its_connection_for_its_next_write(
    broker: BrokerProcess, kind: str
) -> None:
    """A committed write leaves its connection, transacted session and appender for the next
    task (no connection made or closed per task: closing waits on the broker's loop); the
    next write's message ids do not repeat the last one's (the broker would drop repeated
    ones as duplicates), and it costs its commit's round trip (and its producer's, sent one by
    one) but no connection's. A write that fails rolls
    back and closes its connection. Rows with a typed property column are sent one by one
    (``sent``), each write's producer closed."""
    from dovecote.spark.source import _IDLE_SENDERS, BatchWriter

    url, name = f"tcp://127.0.0.1:{broker.openwire_port}", f"kept.{uuid.uuid4().hex[:8]}"
    options = {"url": url, "destination": name}
    if kind == "sent":
        options["propertyColumns"] = "n"

    def rows(first: int, count: int) -> pa.RecordBatch:
        return _texts(first, count, n=list(range(first, first + count)))

    writer = BatchWriter(options)
    key = (url, f"queue://{name}")
    assert writer.write(iter([rows(0, 30)])).count == 30
    (sender,) = _IDLE_SENDERS.idle(key)
    assert sender.appender is not None and (sender.blocks > 0) == (kind == "appended")
    transport = sender.connection.transport
    before = transport.round_trips
    assert writer.write(iter([rows(30, 30), rows(60, 10)])).count == 40
    round_trips = 1 if kind == "appended" else 2
    assert _IDLE_SENDERS.idle(key) == [sender] and transport.round_trips == before + round_trips
    assert not sender.session._producers  # each write's producer is closed
    bad = pa.RecordBatch.from_arrays([pa.array(["x", None], pa.string())], names=["text"])
    with pytest.raises(ValueError, match="needs a text, body or value column"):
        writer.write(iter([rows(70, 5), bad]))
    assert _IDLE_SENDERS.idle(key) == [] and transport.closed
    assert writer.write(iter([rows(75, 5)])).count == 5
    assert _IDLE_SENDERS.idle(key)[0] is not sender
    with StreamClient(url, queue(name)) as stream:
        got = [m.body for m in stream.read(0, stream.plan(after=0).end)]
    assert sorted(got) == sorted(f"row-{i}" for i in [*range(70), *range(75, 80)])


def _write_twice_fail_once_write_again(url: str, name: str) -> dict[str, Any]:
    """What a client sees of a Spark writer's kept connection: two writes of typed rows on
    it, a third that fails midway, a fourth on a new one; what the queue then holds."""
    from dovecote.spark.source import _IDLE_SENDERS, BatchWriter

    writer = BatchWriter({"url": url, "destination": name, "propertyColumns": "n"})
    key = (url, f"queue://{name}")

    def rows(first: int, count: int) -> pa.RecordBatch:
        return _texts(first, count, n=list(range(first, first + count)))

    counts = [writer.write(iter([rows(0, 20)])).count, writer.write(iter([rows(20, 20)])).count]
    (kept,) = _IDLE_SENDERS.idle(key)
    bad = pa.RecordBatch.from_arrays(
        [pa.array(["x", None], pa.string()), pa.array([0, 0])], names=["text", "n"]
    )
    try:
        writer.write(iter([rows(40, 5), bad]))
        failure = ""
    except ValueError as exc:
        failure = str(exc)
    closed = kept.connection.transport.closed and not _IDLE_SENDERS.idle(key)
    counts.append(writer.write(iter([rows(45, 5)])).count)
    renewed = _IDLE_SENDERS.idle(key)[0] is not kept
    with ConnectionFactory(url).create_connection() as connection:
        connection.start()
        held = list(connection.create_session().browse(queue(name)))
    return {
        "counts": counts, "failure": failure, "closed after failing": closed,
        "renewed": renewed,
        "held": sorted((str(m.body), m.properties.get("n"), m.persistent) for m in held),
    }  # fmt: skip


def test_a_kept_writer_connection_against_activemq_as_against_dovecote(peers: Peers) -> None:
    """The same client against both brokers: rows sent one by one (ActiveMQ has no Append
    requests; a typed property column makes dovecote take the same path) on a connection
    kept between writes, a failed write rolled back and its connection dropped, every row
    of the other writes arriving once."""
    name = f"kept.peers.{uuid.uuid4().hex[:8]}"
    outcomes = {
        kind: _write_twice_fail_once_write_again(f"tcp://127.0.0.1:{ports[0]}", name)
        for kind, ports in (("dovecote", peers.dovecote), ("activemq", peers.activemq))
    }
    assert outcomes["dovecote"] == outcomes["activemq"]
    assert outcomes["activemq"]["counts"] == [20, 20, 5]
    assert "needs a text, body or value column" in outcomes["activemq"]["failure"]
    assert outcomes["activemq"]["closed after failing"] and outcomes["activemq"]["renewed"]
    expected = [*range(40), *range(45, 50)]
    assert outcomes["activemq"]["held"] == sorted((f"row-{i}", i, True) for i in expected)


def _write_rows(url: str, name: str) -> int:
    """Rows as a Spark task hands them to the writer: text, a string property, correlation
    ids and types, some of them null, in two Arrow batches of one transaction."""
    from dovecote.spark.source import BatchWriter

    def rows(first: int, count: int) -> pa.RecordBatch:
        numbers = range(first, first + count)
        return _texts(
            first, count,
            region=[f"r{i % 3}" if i % 4 else None for i in numbers],
            correlation_id=[f"c{i}" if i % 5 else None for i in numbers],
            type=["order" if i % 2 else None for i in numbers],
        )  # fmt: skip

    writer = BatchWriter({"url": url, "destination": name, "propertyColumns": "region",
                          "priority": "6"})  # fmt: skip
    return writer.write(iter([rows(0, 700), rows(700, 300)])).count


def _received(url: str, name: str) -> list[tuple[Any, ...]]:
    """What a consumer of the queue receives, in order (ids and times left out: each broker
    makes its own)."""
    got: list[tuple[Any, ...]] = []
    with ConnectionFactory(url).create_connection() as connection:
        connection.start()
        consumer = connection.create_session().create_consumer(queue(name))
        while (m := consumer.receive(5.0 if not got else 1.0)) is not None:
            got.append((m.body, m.priority, m.persistent, m.correlation_id, m.type,
                        m.redelivered, m.expiration, dict(m.properties)))  # fmt: skip
    return got


def test_rows_appended_and_replayed_reach_a_consumer_as_activemqs_sends_do(
    peers: Peers, tmp_path: Path
) -> None:
    """The same writer against both brokers: on dovecote its rows go as Append blocks, which
    the journal keeps as they came (store/journal/FORMAT.md, ``B``) and reads back after a
    restart; on ActiveMQ as sends. A consumer of each queue then receives the same messages,
    in the same order, with the same headers and properties."""
    name = f"appended.peers.{uuid.uuid4().hex[:8]}"
    amq = f"tcp://127.0.0.1:{peers.activemq[0]}"
    assert _write_rows(amq, name) == 1000
    with running_broker(workdir=tmp_path) as broker:
        assert _write_rows(f"tcp://127.0.0.1:{broker.openwire_port}", name) == 1000
    journal = b"".join(path.read_bytes() for path in tmp_path.rglob("db-*.log"))
    assert b"row-999" in journal and b"\xa1B" in journal  # (kept as a block)
    with running_broker(workdir=tmp_path) as broker:  # restarted: read back from the journal
        ours = _received(f"tcp://127.0.0.1:{broker.openwire_port}", name)
    theirs = _received(amq, name)
    assert ours == theirs
    assert [g[0] for g in theirs] == [f"row-{i}" for i in range(1000)]
    assert theirs[7] == ("row-7", 6, True, "c7", "order", False, 0, {"region": "r1"})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings")
def test_a_reading_worker_reuses_its_large_buffers(broker: BrokerProcess) -> None:
    """An executor's read sets its Python worker's malloc to reuse large buffers
    (dovecote.allocator): after one, blocks made and dropped fault almost no page in (a
    process that has not read faults each block's pages in anew: test_allocator_tuning)."""
    url, name = f"tcp://127.0.0.1:{broker.openwire_port}", f"heap.{uuid.uuid4().hex[:8]}"
    sent = send_variety(url, name)
    read = (
        "from dovecote.spark.source import SCHEMA, DovecoteStreamReader, SequenceRange\n"
        f"reader = DovecoteStreamReader({{'url': {url!r}, 'destination': {name!r}}}, SCHEMA)\n"
        "part = SequenceRange(0, reader._stream().plan(after=0).end)\n"
        f"assert sum(batch.num_rows for batch in reader.read(part)) == {sent}\n"
        "reader.stop()\n"
    )
    assert faults_per_block(read) < BLOCK_PAGES // 50


def test_a_worker_that_wrote_to_many_destinations_keeps_a_few_connections(
    broker: BrokerProcess,
) -> None:
    """A writer's connection is kept for its destination; past ``KEPT_AT_MOST`` idle ones,
    the one idle longest is closed (a long-lived worker writing to ever new destinations
    would otherwise keep a connection for each), and a destination written to again takes
    its own back."""
    from dovecote.spark.source import _IDLE_SENDERS, KEPT_AT_MOST, BatchWriter

    url, name = f"tcp://127.0.0.1:{broker.openwire_port}", f"many.{uuid.uuid4().hex[:8]}"
    _IDLE_SENDERS.clear()  # (what earlier tests left)
    keys = [(url, f"queue://{name}.{i}") for i in range(KEPT_AT_MOST + 2)]

    def write(i: int) -> None:
        writer = BatchWriter({"url": url, "destination": f"{name}.{i}"})
        assert writer.write(iter([_texts(0, 3)])).count == 3

    senders = []
    for i in range(KEPT_AT_MOST + 2):
        write(i)
        senders.append(_IDLE_SENDERS.idle(keys[i])[-1])
    write(2)  # the oldest still kept, given back last: now the one kept longest is #3
    write(KEPT_AT_MOST + 2)
    kept = [sender for key in keys for sender in _IDLE_SENDERS.idle(key)]
    assert kept == [senders[2], *senders[4:]]
    closed = [True, True, False, True] + [False] * (KEPT_AT_MOST - 2)
    deadline = time.monotonic() + 10  # (closed in a thread of their own)
    while [s.connection.transport.closed for s in senders] != closed:
        assert time.monotonic() < deadline, [s.connection.transport.closed for s in senders]
        time.sleep(0.01)
