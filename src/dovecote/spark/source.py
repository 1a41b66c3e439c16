"""The PySpark data source "dovecote" (compatibility X1), on PySpark's Python Data Source API.

Streaming read, exactly once: offsets are the broker's sequence numbers. For each
micro-batch the driver plans (after, end] with at most ``maxMessagesPerBatch`` messages
(``Offsets``), cuts it into ``numPartitions`` sub-ranges, and the executors read their
sub-ranges without consuming anything, as columnar blocks they hand Spark as Arrow record
batches (``Blocks``; dovecote.spark.blocks). Only when Spark commits the batch does
the source remove everything up to ``end`` from the broker (``Commit``). A task that fails
reads its range again and gets the same messages; a driver restarted from its checkpoint
replans the batch it had not finished over the same, still present, messages; a broker
restart keeps persistent messages with their sequence numbers. docs/streams.md has the
protocol, the README the guarantee and its limits.

``trigger(availableNow=True)`` reads what the destination holds at the start, in batches of
``maxMessagesPerBatch``. Batch read is a browse snapshot of a queue (it also works against
ActiveMQ). Writes take Arrow record batches and send each partition in one broker
transaction: a failed task rolls back and leaves nothing half-sent.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, pairwise
from typing import Any, Generic, TypeVar

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dovecote.allocator import tune_allocator
from dovecote.client import Connection, ConnectionFactory, Message
from dovecote.client.session import Session
from dovecote.client.streams import (
    DESTINATION,
    EXPIRATION,
    INTERNAL_PROPERTIES,
    SEQUENCE,
    Plan,
    StreamAppender,
    StreamClient,
    is_dovecote,
)
from dovecote.client.transport import JMSError
from dovecote.core.destinations import Destination, parse_destination
from dovecote.spark.blocks import append_block, append_blocks, record_batch

SCHEMA = StructType(
    [
        StructField("message_id", StringType()),
        StructField("destination", StringType()),
        StructField("timestamp", TimestampType()),
        StructField("expiration", TimestampType()),
        StructField("priority", IntegerType()),
        StructField("redelivered", BooleanType()),
        StructField("correlation_id", StringType()),
        StructField("type", StringType()),
        StructField("reply_to", StringType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("body", BinaryType()),
        StructField("text", StringType()),
        StructField("sequence", LongType()),
    ]
)
"""What a read gives, a row per message (a DDL string would need Spark's JVM to parse)."""
DEFAULT_URL = "tcp://127.0.0.1:61616"
DEFAULT_MAX_PER_BATCH = 10_000
KEPT_AT_MOST = 4
"""Connections an executor's Python worker keeps idle between tasks, in each of its pools."""
READ_MMAP_THRESHOLD = 32 << 20
"""glibc's malloc in an executor's Python worker from its first read on: buffers under this
from the heap (dovecote.allocator). A read has more of its blocks' buffers alive at once than
the broker: its chunks, frames and bodies, and the record batches Spark has not taken yet."""
READ_TRIM_THRESHOLD = 64 << 20
"""And how much free memory at the heap's top it keeps."""
_Kept = TypeVar("_Kept")


class _Idle(Generic[_Kept]):
    """What a Python worker keeps between two tasks: Spark reuses its workers, and a new
    connection costs a few round trips, and closing one another, on the broker's busy loop.
    What a task leaves in use when it fails is closed instead, and so is the one idle longest
    beyond ``KEPT_AT_MOST`` (a worker that wrote to many destinations keeps a few), in a
    thread of its own: the task that gave its own back has done its work."""

    def __init__(self, close: Callable[[_Kept], None]) -> None:
        self._close = close
        self._lock = threading.Lock()
        self._kept: list[tuple[Hashable, _Kept]] = []
        """The idle ones with their keys, the one given back last last."""

    def idle(self, key: Hashable) -> list[_Kept]:
        """The idle ones kept for ``key``, the one given back last last."""
        with self._lock:
            return [kept for k, kept in self._kept if k == key]

    def clear(self) -> None:
        """Close every idle one (tests)."""
        with self._lock:
            kept, self._kept = self._kept, []
        for _, idle in kept:
            self._close(idle)

    @contextmanager
    def borrowed(self, key: Hashable, make: Callable[[], _Kept]) -> Iterator[_Kept]:
        kept: _Kept | None = None
        with self._lock:
            for i in range(len(self._kept) - 1, -1, -1):
                if self._kept[i][0] == key:
                    kept = self._kept.pop(i)[1]
                    break
        if kept is None:
            kept = make()
        try:
            yield kept
        except BaseException:
            self._close(kept)
            raise
        with self._lock:
            self._kept.append((key, kept))
            surplus = self._kept[: max(0, len(self._kept) - KEPT_AT_MOST)]
            del self._kept[: len(surplus)]
        if surplus:
            threading.Thread(
                target=self._close_quietly, args=[idle for _, idle in surplus],
                name="dovecote-idle-close", daemon=True,
            ).start()  # fmt: skip

    def _close_quietly(self, *idle: _Kept) -> None:
        for kept in idle:
            with contextlib.suppress(Exception):
                self._close(kept)


@dataclass
class _Sender:
    """A writer's connection kept between tasks: its transacted session, and the Append
    requests' appender (dovecote only) with how many blocks it has sent, so that the message
    ids it makes never repeat on the connection."""

    connection: Connection
    session: Session
    appender: StreamAppender | None
    blocks: int = 0


_IDLE_CLIENTS: _Idle[StreamClient] = _Idle(StreamClient.close)
"""Executors' connections between two reads (DovecoteStreamReader.read)."""
_IDLE_SENDERS: _Idle[_Sender] = _Idle(lambda sender: sender.connection.close())
"""Executors' connections between two writes (TransactionalWriter.write)."""


def _destination(options: Mapping[str, str]) -> Destination:
    text = options.get("destination")
    if not text:
        raise ValueError("the dovecote data source needs the option destination")
    return parse_destination(text if "://" in text else f"queue://{text}")


def _time(ms: int) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC) if ms else None


def to_row(m: Message, destination: Destination) -> tuple[Any, ...]:
    props = m.properties
    text = m.body if isinstance(m.body, str) else None
    body = m.body.encode() if isinstance(m.body, str) else m.body
    if not isinstance(body, bytes):
        body = repr(body).encode()  # map and stream bodies: their Python form, as bytes
    user = {k: str(v) for k, v in props.items() if k not in INTERNAL_PROPERTIES}
    return (
        m.message_id,
        str(props.get(DESTINATION, destination)),
        _time(m.timestamp),
        _time(int(props.get(EXPIRATION, m.expiration) or 0)),
        m.priority,
        m.redelivered,
        m.correlation_id,
        m.type,
        str(m.reply_to) if m.reply_to else None,
        user,
        body,
        text,
        int(props.get(SEQUENCE, 0)),
    )


@dataclass
class SequenceRange(InputPartition):
    after: int
    up_to: int


class DovecoteStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.url = options.get("url", DEFAULT_URL)
        self.destination = _destination(options)
        self.schema = schema
        self.client_id = options.get("clientId")
        self.subscription = options.get("subscriptionName")
        if self.destination.is_topic and not (self.client_id and self.subscription):
            raise ValueError("reading a topic needs the options clientId and subscriptionName")
        self.max_per_batch = int(options.get("maxMessagesPerBatch", DEFAULT_MAX_PER_BATCH))
        self.num_partitions = max(1, int(options.get("numPartitions", 1)))
        self.block_bytes = int(options.get("blockBytes", 0))
        """About how much body each record batch an executor reads holds (0: the broker's
        default, 4 MiB)."""
        self._client: StreamClient | None = None
        self._planned_once = False
        self._committed = 0
        self._planned: tuple[int, Plan] | None = None
        """The last plan latestOffset made: (after, plan), cut into numPartitions parts."""
        self._removal: Future[int] | None = None
        """The last Commit, sent from a thread of its own (see commit)."""
        self._remover: ThreadPoolExecutor | None = None
        self._remover_client: StreamClient | None = None
        self._target: int | None = None
        """trigger(availableNow=True): the last sequence number there was at the start."""

    def __getstate__(self) -> dict[str, Any]:
        # The driver's connection stays on the driver; executors open their own.
        state = dict(self.__dict__)
        state.update(_client=None, _removal=None, _remover=None, _remover_client=None)
        return state

    def _stream(self) -> StreamClient:
        if self._client is None:
            self._client = self._new_client()
        return self._client

    def _new_client(self) -> StreamClient:
        return StreamClient(self.url, self.destination, self.client_id, self.subscription)

    def initialOffset(self) -> dict[str, int]:
        # Planning once at the start creates a durable subscription that does not exist yet
        # (Spark asks twice as a query starts: one round trip is enough).
        if not self._planned_once:
            self._stream().plan(after=0, max_messages=1)
            self._planned_once = True
        return {"sequence": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_per_batch) if self.max_per_batch > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        most = limit.max_rows if isinstance(limit, ReadMaxRows) else 0
        # (prepare: the broker encodes the parts' blocks while Spark writes its checkpoint.)
        plan = self._stream().plan(after=start["sequence"], max_messages=most,
                                   up_to=self._target, splits=self.num_partitions,
                                   prepare=True)  # fmt: skip
        self._planned = (start["sequence"], plan)
        # Spark asks for the next batch only once the batch ending at ``start`` has finished
        # (its sink output committed), but calls commit() for it only when it goes on to run
        # a new batch. Committing ``start`` here frees the broker of the last batch's
        # messages even when no new batch follows. It is idempotent, like commit(). (After
        # the plan, which needs none of it: the broker answers that first.)
        if start["sequence"] > self._committed:
            self.commit(start)
        if plan.end == start["sequence"]:
            # Nothing new: the query may end here (availableNow does), and Spark does not wait
            # for stop(); the last batch's removal is done before this answer.
            self._wait_for_removal()
        return {"sequence": plan.end}

    def prepareForTriggerAvailableNow(self) -> None:
        # What is there now, in batches of maxMessagesPerBatch; nothing that comes later.
        # (This plan made the subscription, as initialOffset's would.)
        self._target = self._stream().plan(after=0).end
        self._planned_once = True

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[SequenceRange]:
        after, up_to = start["sequence"], end["sequence"]
        if up_to <= after:
            return []
        planned = self._planned
        if planned is not None and planned[0] == after and planned[1].end == up_to:
            plan = planned[1]  # as latestOffset planned it: one request fewer per batch
        else:  # a batch replanned after a restart
            plan = self._stream().plan(after=after, up_to=up_to, splits=self.num_partitions)
        return [SequenceRange(lo, hi) for lo, hi in pairwise(plan.bounds) if hi > lo]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # The range in a few columnar blocks, each one record batch (no object per message),
        # handed to Spark as it arrives while the broker makes the next.
        assert isinstance(partition, SequenceRange)
        tune_allocator(READ_MMAP_THRESHOLD, READ_TRIM_THRESHOLD)
        schema = to_arrow_schema(self.schema, timezone="UTC")
        # A read left unfinished (failed, or not read to its end) closes its connection.
        # (one connection a worker: a request names its destination, whichever query asks)
        with _IDLE_CLIENTS.borrowed(self.url, self._new_client) as stream:
            stream.retarget(self.destination, self.client_id, self.subscription)
            for block in stream.iter_blocks(partition.after, partition.up_to, self.block_bytes):
                yield record_batch(block, schema)

    def commit(self, end: dict[str, int]) -> None:
        # Removing a batch (a durable write on the broker) need not hold up planning the next
        # one, which starts after it anyway: it runs in a thread with its own connection, one
        # at a time. A failure shows at the next commit or at stop; a later Commit covers a
        # lost one.
        if end["sequence"] > self._committed:
            self._wait_for_removal()
            if self._remover is None:
                self._remover = ThreadPoolExecutor(1, thread_name_prefix="dovecote-commit")
            self._removal = self._remover.submit(self._remove_through, end["sequence"])
            self._committed = end["sequence"]

    def _remove_through(self, up_to: int) -> int:
        # (in the remover's one thread: its own connection, kept from one batch to the next)
        if self._remover_client is None:
            self._remover_client = self._new_client()
        return self._remover_client.commit(up_to)

    def _wait_for_removal(self) -> None:
        removal, self._removal = self._removal, None
        if removal is not None:
            removal.result()

    def stop(self) -> None:
        try:
            self._wait_for_removal()  # a finished query leaves nothing it committed
        finally:
            if self._remover is not None:
                self._remover.shutdown()
                self._remover = None
            if self._remover_client is not None:
                self._remover_client.close()
                self._remover_client = None
            if self._client is not None:
                self._client.close()
                self._client = None


class BrowseReader(DataSourceReader):
    """A snapshot of what a queue holds, consuming nothing."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.url = options.get("url", DEFAULT_URL)
        self.destination = _destination(options)
        if not self.destination.is_queue:
            raise ValueError("a batch read browses a queue; read a topic as a stream")
        self.selector = options.get("selector")

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        with ConnectionFactory(self.url).create_connection() as connection:
            connection.start()  # a browser sees nothing on a stopped connection
            session = connection.create_session()
            for message in session.browse(self.destination, self.selector):
                yield to_row(message, self.destination)


@dataclass
class SentMessages(WriterCommitMessage):
    count: int


class TransactionalWriter:
    """Send one partition's rows in one transaction: all of them, or (on any failure) none."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.url = options.get("url", DEFAULT_URL)
        self.destination = _destination(options)
        self.persistent = options.get("persistent", "true").lower() != "false"
        self.priority = int(options.get("priority", 4))
        self.time_to_live = int(options.get("timeToLive", 0))
        names = options.get("propertyColumns", "")
        self.property_columns = [c.strip() for c in names.split(",") if c.strip()]

    def _messages(self, batch: pa.RecordBatch) -> Iterator[Message]:
        """A batch's rows as messages, a column at a time: the body from ``text``, else
        ``body``, else ``value`` (the first that is not null in the row)."""
        names = set(batch.schema.names)

        def column(name: str) -> list[Any]:
            return batch.column(name).to_pylist() if name in names else [None] * batch.num_rows

        texts, bodies, values = column("text"), column("body"), column("value")
        correlation_ids, types = column("correlation_id"), column("type")
        properties = {c: column(c) for c in self.property_columns}
        for i in range(batch.num_rows):
            body: str | bytes
            if texts[i] is not None:
                body = str(texts[i])
            elif bodies[i] is not None:
                body = bytes(bodies[i])
            elif values[i] is not None:
                value = values[i]
                body = bytes(value) if isinstance(value, bytes | bytearray) else str(value)
            else:
                raise ValueError("a row to send needs a text, body or value column")
            props = {c: v[i] for c, v in properties.items() if v[i] is not None}
            yield Message(body, properties=props, correlation_id=correlation_ids[i],
                          type=types[i])  # fmt: skip

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages:
        batches = iter(iterator)
        first = next(batches, None)
        if first is None:
            return SentMessages(0)
        # A failed write rolls back and closes its connection; a committed one keeps it.
        with _IDLE_SENDERS.borrowed((self.url, str(self.destination)), self._new_sender) as sender:
            rest = chain([first], batches)
            try:
                if sender.appender is not None and self._appendable(first.schema):
                    sent = self._append(sender, rest)
                else:
                    sent = self._send(sender.session, rest)
                sender.session.commit()
            except BaseException:
                with contextlib.suppress(JMSError, OSError):
                    sender.session.rollback()
                raise
        return SentMessages(sent)

    def _new_sender(self) -> _Sender:
        connection = ConnectionFactory(self.url).create_connection()
        try:
            session = connection.create_session(transacted=True)
            appender = None
            if is_dovecote(connection):
                appender = StreamAppender(session, self.destination)
        except BaseException:
            connection.close()
            raise
        return _Sender(connection, session, appender)

    def _appendable(self, schema: pa.Schema) -> bool:
        """Whether the rows go as Append blocks (a dovecote broker): their property columns
        are strings, as a block's properties are (others are sent typed, one by one)."""
        return all(
            pa.types.is_string(schema.field(name).type)
            for name in self.property_columns
            if name in schema.names
        )

    def _append(self, sender: _Sender, batches: Iterator[pa.RecordBatch]) -> int:
        """The rows as a few large Append requests in the sender's transaction."""
        appender = sender.appender
        assert appender is not None
        # Each block's messages as from a producer of their own (session 0: none of the
        # connection's), so ids read as a client's (a consumer's audit parses them).
        prefix = f"{sender.connection.connection_id}:0:"
        sent = 0
        for run in (run for batch in batches for run in append_blocks(batch)):
            present = [c for c in self.property_columns if c in run.schema.names]
            block = append_block(
                run, f"{prefix}{sender.blocks}:", self.priority, self.time_to_live, present,
                int(time.time() * 1000),
            )  # fmt: skip
            sender.blocks += 1
            appender.append(block, persistent=self.persistent)
            sent += run.num_rows
        appender.finish()
        return sent

    def _send(self, session: Session, batches: Iterator[pa.RecordBatch]) -> int:
        producer = session.create_producer(self.destination)
        sent = 0
        for batch in batches:
            for message in self._messages(batch):
                producer.send(
                    message, persistent=self.persistent,
                    priority=self.priority, time_to_live=self.time_to_live,
                )  # fmt: skip
                sent += 1
        producer.close()  # (the connection stays for the next task)
        return sent


class BatchWriter(TransactionalWriter, DataSourceArrowWriter):
    pass


class StreamWriter(TransactionalWriter, DataSourceStreamArrowWriter):
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every partition committed its own transaction already."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """A failed partition rolled its transaction back; the others stay sent."""


class DovecoteDataSource(DataSource):
    """``spark.dataSource.register(DovecoteDataSource)``, then ``format("dovecote")``."""

    @classmethod
    def name(cls) -> str:
        return "dovecote"

    def schema(self) -> StructType:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DovecoteStreamReader:
        return DovecoteStreamReader(self.options, schema)

    def reader(self, schema: StructType) -> BrowseReader:
        return BrowseReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        return BatchWriter(self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        return StreamWriter(self.options)
