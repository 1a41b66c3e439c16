"""Read and write throughput of the Spark data source against one dovecote broker, with 1 and
2 partitions, on local[2] (issue 6). A benchmark, not a test:

    .venv/bin/python bench/spark_throughput.py [messages]

Read: N persistent 1 KiB messages wait on a queue; a streaming query (availableNow trigger,
maxMessagesPerBatch N/4) reads them into a noop sink; timed from start to the query's end,
including Spark's batch planning and the broker commits. Write: a DataFrame of N 1 KiB rows
written with format("dovecote") (one transaction per partition), timed around save().
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

from brokers import running_broker  # noqa: E402
from dovecote.client import ConnectionFactory, Message  # noqa: E402
from dovecote.client.streams import StreamClient  # noqa: E402
from dovecote.core.destinations import queue  # noqa: E402
from dovecote.spark import register  # noqa: E402


def fill(url: str, name: str, count: int) -> None:
    body = "x" * 1024
    with ConnectionFactory(url + "?jms.useAsyncSend=true").create_connection() as connection:
        producer = connection.create_session().create_producer(queue(name))
        for _ in range(count):
            producer.send(Message(body))
    with StreamClient(url, queue(name)) as stream:  # every send has arrived
        while stream.plan(after=0).count < count:
            time.sleep(0.05)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    results = []
    with tempfile.TemporaryDirectory() as tmp, running_broker(workdir=Path(tmp)) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        for partitions in (1, 2):
            name = f"bench.read.{partitions}"
            fill(url, name, count)
            started = time.monotonic()
            query = (
                spark.readStream.format("dovecote").option("url", url)
                .option("destination", name).option("numPartitions", str(partitions))
                .option("maxMessagesPerBatch", str(count // 4)).load()
                .writeStream.format("noop")
                .option("checkpointLocation", f"{tmp}/checkpoint-{partitions}")
                .trigger(availableNow=True).start()
            )  # fmt: skip
            query.awaitTermination()
            elapsed = time.monotonic() - started
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            results.append(("read", partitions, rows, elapsed))
        rows_df = spark.range(count).selectExpr("repeat('x', 1024) as text")
        for partitions in (1, 2):
            df = rows_df.repartition(partitions).cache()
            df.count()
            started = time.monotonic()
            df.write.format("dovecote").mode("append").option("url", url).option(
                "destination", f"bench.write.{partitions}").save()  # fmt: skip
            results.append(("write", partitions, count, time.monotonic() - started))
    spark.stop()
    print("| direction | partitions | messages | seconds | msg/s |")
    print("|---|---:|---:|---:|---:|")
    for direction, partitions, rows, elapsed in results:
        print(f"| {direction} | {partitions} | {rows:,} | {elapsed:.1f} | {rows / elapsed:,.0f} |")


if __name__ == "__main__":
    main()
