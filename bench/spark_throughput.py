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

The ratio (dovecote / Parquet rows per second) is what to compare across machines: absolute
figures depend on the machine and on what else runs on it. Each figure is the median of
``rounds`` rounds (each round writes and reads every case once, in the same session).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from brokers import running_broker  # noqa: E402
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


def stream_rows(reader: Any, checkpoint: str) -> tuple[int, float]:
    """Run a stream into the noop sink with availableNow; (rows, seconds)."""
    started = time.monotonic()
    query = (
        reader.writeStream.format("noop").option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    elapsed = time.monotonic() - started
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    return sum(p["numInputRows"] for p in query.recentProgress), elapsed


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
    results: list[tuple[str, int, int, float, float]] = []
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
            rows, theirs = stream_rows(theirs_reader, f"{tmp}/parquet-checkpoint-{case}")
            assert rows == count, f"the Parquet stream read {rows} rows"
            ours_reader = (
                spark.readStream.format("dovecote").option("url", url)
                .option("destination", f"bench.{case}")
                .option("numPartitions", str(partitions))
                .option("maxMessagesPerBatch", str(count // 4)).load()
            )  # fmt: skip
            cpu = share.cpu()
            rows, ours = stream_rows(ours_reader, f"{tmp}/checkpoint-{case}")
            share.note("streaming read", partitions, cpu, ours)
            assert rows == count, f"the dovecote stream read {rows} rows"
            results.append(("streaming read", partitions, count, ours, theirs))
    spark.stop()
    print("| | partitions | rows | dovecote rows/s | Parquet rows/s | dovecote / Parquet |"
          " broker CPU |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for what, partitions in sorted({(r[0], r[1]) for r in results}):
        runs = [r for r in results if r[:2] == (what, partitions)]
        ours = median(rows / t for _, _, rows, t, _ in runs)
        theirs = median(rows / t for _, _, rows, _, t in runs)
        ratio = median(t / o for _, _, _, o, t in runs)
        busy = median(share.shares[(what, partitions)])
        print(f"| {what} | {partitions} | {count:,} | {ours:,.0f} | {theirs:,.0f} | {ratio:.0%} |"
              f" {busy:.0%} |")  # fmt: skip


if __name__ == "__main__":
    main()
