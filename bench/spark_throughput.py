"""The Spark data source against Spark's own Parquet source and sink, on the same rows, in
one run on local[2] (issue 32). A benchmark, not a test:

    .venv/bin/python bench/spark_throughput.py [messages] [rounds]   # 100,000, 3

Write: a DataFrame of N rows of 1 KiB text (cached), written with format("dovecote") as
persistent messages (one broker transaction per partition), against df.write.parquet; on 1
and 2 partitions, timed around save(). The queues written are then the backlogs read.

Read: the backlog of N persistent 1 KiB messages, streamed with trigger(availableNow=True)
and maxMessagesPerBatch N/4 into a noop sink, timed from start to the query's end (batch
planning and broker commits included), against a Parquet stream of the same rows in the
source's schema (N/4 rows per batch: maxFilesPerTrigger over files of N/4 or N/8 rows).

A Python source's ceiling, in the same run: a streaming source with no broker and no client
(``CeilingSource``), handing Spark record batches of the same schema made in memory, in the
same batches and blocks. Every Python streaming source pays what it pays: Spark's start of
the query's Python process, and the rows' way from the Python workers to the JVM.
Each read also says how long its query took to start (from start() to its first batch).

The ratio (dovecote / Parquet rows per second) is what to compare across machines: absolute
figures depend on the machine and on what else runs on it. Each figure is the median of
``rounds`` rounds (each round writes and reads every case once, in the same session); the
ratio is followed by its range over the rounds.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import numpy as np  # noqa: E402
import pyarrow as pa  # type: ignore[import-untyped]  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402
from pyspark.sql.streaming.datasource import (  # noqa: E402
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from brokers import running_broker  # noqa: E402
from dovecote.core.stream_blocks import DEFAULT_BLOCK_BYTES  # noqa: E402
from dovecote.spark import register  # noqa: E402
from dovecote.spark.source import SCHEMA  # noqa: E402

# 1 KiB of hex per row, different in every row (Parquet cannot make it a dictionary).
TEXT = "substring(concat_ws('', transform(sequence(1, 32), i -> sha2(concat(id, '-', i), 256))), 1, 1024)"  # noqa: E501


def process_cpu(pid: int) -> float:
    """User and system CPU seconds a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BrokerShare:
    """The broker process's CPU time over each timed dovecote case, as a share of its wall
    time: near 100%, the broker's one loop bounds the case; far below, the round trips and
    the Spark side do."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.shares: dict[tuple[str, int], list[float]] = {}

    def cpu(self) -> float:
        return process_cpu(self.pid)

    def note(self, what: str, partitions: int, cpu_before: float, elapsed: float) -> None:
        used = process_cpu(self.pid) - cpu_before
        self.shares.setdefault((what, partitions), []).append(used / elapsed)


def timed(action: Any) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


@dataclass
class Streamed:
    rows: int
    seconds: float
    """From start() to the query's end."""
    start: float
    """From start() to the first batch's trigger (Spark's clock, to the millisecond)."""


def stream_rows(reader: Any, checkpoint: str) -> Streamed:
    """Run a stream into the noop sink with availableNow."""
    started_at, started = time.time(), time.monotonic()
    query = (
        reader.writeStream.format("noop").option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    elapsed = time.monotonic() - started
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    progress = query.recentProgress
    first = dt.datetime.fromisoformat(progress[0]["timestamp"]).timestamp()
    return Streamed(sum(p["numInputRows"] for p in progress), elapsed, first - started_at)


@dataclass
class RowRange(InputPartition):
    after: int
    up_to: int


class CeilingReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The rows in batches of ``perBatch``, each split into ``numPartitions`` ranges, each
    range handed to Spark in record batches of a dovecote block's size (~3,900 rows of
    1 KiB), made in memory: every column a few buffers, no Python object per row."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        self.rows = int(options["rows"])
        self.per_batch = int(options["perBatch"])
        self.num_partitions = int(options["numPartitions"])
        self.schema = schema

    def initialOffset(self) -> dict[str, int]:
        return {"row": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.per_batch)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        assert isinstance(limit, ReadMaxRows)
        return {"row": min(self.rows, start["row"] + limit.max_rows)}

    def prepareForTriggerAvailableNow(self) -> None:
        pass  # (the rows there are are all there will be)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[RowRange]:
        lo, hi, n = start["row"], end["row"], self.num_partitions
        cuts = [lo + (hi - lo) * i // n for i in range(n + 1)]
        return [RowRange(a, b) for a, b in pairwise(cuts) if b > a]

    def read(self, partition: InputPartition) -> Any:
        assert isinstance(partition, RowRange)
        schema = to_arrow_schema(self.schema, timezone="UTC")
        step = DEFAULT_BLOCK_BYTES // (1024 + 64)
        for lo in range(partition.after, partition.up_to, step):
            yield ceiling_batch(lo, min(partition.up_to, lo + step), schema)

    def commit(self, end: dict[str, int]) -> None:
        pass


def ceiling_batch(lo: int, hi: int, schema: Any) -> Any:
    """Rows ``lo`` to ``hi`` in the source's schema: 1 KiB of text as body and text."""
    n = hi - lo
    row = (b"%064x" % lo) * 16
    ids = b"ID:ceiling-%019d" % lo

    def repeated(kind: Any, value: bytes) -> Any:
        offsets = pa.py_buffer(np.arange(n + 1, dtype="<i4") * len(value))
        return pa.Array.from_buffers(kind, n, [None, offsets, pa.py_buffer(value * n)])

    body = repeated(pa.binary(), row)
    columns = {
        "message_id": repeated(pa.string(), ids),
        "destination": repeated(pa.string(), b"queue://bench"),
        "timestamp": pa.array(np.full(n, time.time_ns() // 1000), pa.timestamp("us", "UTC")),
        "expiration": pa.nulls(n, pa.timestamp("us", "UTC")),
        "priority": pa.array(np.full(n, 4, "i4")),
        "redelivered": pa.array(np.zeros(n, bool)),
        "correlation_id": pa.nulls(n, pa.string()),
        "type": pa.nulls(n, pa.string()),
        "reply_to": pa.nulls(n, pa.string()),
        "properties": pa.MapArray.from_arrays(
            pa.array(np.zeros(n + 1, "i4")),
            pa.array([], pa.string()),
            pa.array([], pa.string()),
            type=schema.field("properties").type,
        ),
        "body": body,
        "text": body.view(pa.string()),
        "sequence": pa.array(np.arange(lo, hi, dtype="i8")),
    }
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


class CeilingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench-ceiling"

    def schema(self) -> Any:
        return SCHEMA

    def streamReader(self, schema: Any) -> CeilingReader:
        return CeilingReader(self.options, schema)


def source_rows(spark: SparkSession, count: int) -> DataFrame:
    """Rows in the source's schema, as the dovecote source gives the written messages."""
    return spark.range(count).selectExpr(
        "concat('ID:bench-', id) as message_id", "'queue://bench' as destination",
        "current_timestamp() as timestamp", "cast(null as timestamp) as expiration",
        "4 as priority", "false as redelivered", "cast(null as string) as correlation_id",
        "cast(null as string) as type", "cast(null as string) as reply_to",
        "cast(map() as map<string,string>) as properties",
        f"cast({TEXT} as binary) as body", f"{TEXT} as text", "id as sequence",
    )  # fmt: skip


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    spark.dataSource.register(CeilingSource)
    results: list[tuple[str, int, int, float, float]] = []
    reads: list[tuple[int, Streamed, Streamed, Streamed]] = []  # dovecote, ceiling, Parquet
    with tempfile.TemporaryDirectory() as tmp, running_broker(workdir=Path(tmp)) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        share = BrokerShare(broker.process.pid)
        texts = spark.range(count).selectExpr(f"{TEXT} as text")
        for round_, partitions in ((r, p) for r in range(rounds) for p in (1, 2)):
            case = f"{round_}-{partitions}"
            # Written, then read: one backlog on the broker at a time.
            df = texts.repartition(partitions).cache()
            df.count()
            writer = df.write.format("dovecote").mode("append").option("url", url)
            cpu = share.cpu()
            ours = timed(writer.option("destination", f"bench.{case}").save)
            share.note("batch write", partitions, cpu, ours)
            theirs = timed(partial(df.write.parquet, f"{tmp}/written-{case}"))
            results.append(("batch write", partitions, count, ours, theirs))
            df.unpersist()
            parquet = f"{tmp}/rows-{case}"
            files = 4 * partitions  # N/4 rows per batch, in `partitions` files
            source_rows(spark, count).repartition(files, "sequence").sortWithinPartitions(
                "sequence").write.parquet(parquet)  # fmt: skip
            theirs_reader = (
                spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", partitions)
                .parquet(parquet)
            )  # fmt: skip
            parquet_read = stream_rows(theirs_reader, f"{tmp}/parquet-checkpoint-{case}")
            assert parquet_read.rows == count, f"the Parquet stream read {parquet_read.rows} rows"
            ceiling_reader = (
                spark.readStream.format("bench-ceiling").option("rows", str(count))
                .option("perBatch", str(count // 4)).option("numPartitions", str(partitions))
                .load()
            )  # fmt: skip
            ceiling = stream_rows(ceiling_reader, f"{tmp}/ceiling-checkpoint-{case}")
            assert ceiling.rows == count, f"the ceiling source read {ceiling.rows} rows"
            ours_reader = (
                spark.readStream.format("dovecote").option("url", url)
                .option("destination", f"bench.{case}")
                .option("numPartitions", str(partitions))
                .option("maxMessagesPerBatch", str(count // 4)).load()
            )  # fmt: skip
            cpu = share.cpu()
            dovecote_read = stream_rows(ours_reader, f"{tmp}/checkpoint-{case}")
            share.note("streaming read", partitions, cpu, dovecote_read.seconds)
            read = dovecote_read.rows
            assert read == count, f"the dovecote stream read {read} rows"
            results.append(("streaming read", partitions, count, dovecote_read.seconds,
                            parquet_read.seconds))  # fmt: skip
            reads.append((partitions, dovecote_read, ceiling, parquet_read))
    spark.stop()
    print("| | partitions | rows | dovecote rows/s | Parquet rows/s | dovecote / Parquet |"
          " broker CPU |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for what, partitions in sorted({(r[0], r[1]) for r in results}):
        runs = [r for r in results if r[:2] == (what, partitions)]
        ours = median(rows / t for _, _, rows, t, _ in runs)
        theirs = median(rows / t for _, _, rows, _, t in runs)
        ratios = [t / o for _, _, _, o, t in runs]
        spread = f"{min(ratios):.0%}-{max(ratios):.0%}"
        busy = median(share.shares[(what, partitions)])
        print(f"| {what} | {partitions} | {count:,} | {ours:,.0f} | {theirs:,.0f} |"
              f" {median(ratios):.0%} ({spread}) | {busy:.0%} |")  # fmt: skip
    print_reads(reads)


def print_reads(reads: list[tuple[int, Streamed, Streamed, Streamed]]) -> None:
    """The streaming reads against a Python source's ceiling, and split at the first batch:
    the query's start, then its batches."""
    print()
    head = "| streaming read | partitions | start (s): dovecote, ceiling, Parquet |"
    print(f"{head} ceiling / Parquet | dovecote / ceiling | after the start: dovecote / Parquet |")
    print("|---|---:|---:|---:|---:|---:|")
    for partitions in sorted({r[0] for r in reads}):
        runs = [r[1:] for r in reads if r[0] == partitions]
        starts = ", ".join(f"{median(run[i].start for run in runs):.2f}" for i in range(3))
        ceiling = median(p.seconds / c.seconds for _, c, p in runs)
        ours = median(c.seconds / d.seconds for d, c, _ in runs)
        after = median((p.seconds - p.start) / (d.seconds - d.start) for d, _, p in runs)
        print(f"| | {partitions} | {starts} | {ceiling:.0%} | {ours:.0%} | {after:.0%} |")


if __name__ == "__main__":
    main()
