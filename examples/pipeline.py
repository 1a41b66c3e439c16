"""A ready pipeline (compatibility X2): orders arrive on the queue ``orders`` as JSON; Spark sums
them per customer and event-time window into Parquet, and sends an alert to the topic ``alerts``
for every window whose total is over a threshold.

One command, on local Spark, with a broker embedded in this process:

    .venv/bin/python examples/pipeline.py --orders 2000 --once

``--orders N`` first sends N sample orders; ``--once`` processes what is there and stops
(without it the pipeline runs until Ctrl-C). Nothing listening at ``--broker`` (default
tcp://127.0.0.1:61616) means an embedded broker is started there. On a cluster the same file
runs unchanged with a broker the executors can reach:

    spark-submit --master spark://host:7077 examples/pipeline.py --broker tcp://mq:61616

Exactly once from the queue into Parquet: the source hands over each batch exactly once,
and each batch writes its own Parquet directory (``windows/batch=N``), replaced if Spark
runs that batch again. Alerts are sent in a broker transaction per partition; a batch Spark
runs again sends its alerts again, with the same correlation id (window and customer), so a
consumer can drop repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dovecote.client import ConnectionFactory, Message
from dovecote.spark import register

ORDER_SCHEMA = "order_id long, customer string, amount double, ts long"
CUSTOMERS = ["ada", "grace", "linus", "barbara", "ken"]


def listening(url: str) -> bool:
    parts = urlparse(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 61616), 1):
            return True
    except OSError:
        return False


def start_embedded_broker(url: str, data_dir: Path) -> None:
    """A dovecote broker in a thread of this process, OpenWire at ``url``."""
    from dovecote.app import BrokerApp
    from dovecote.config import (
        BrokerSection,
        Config,
        ConsoleSection,
        OpenWireSection,
        StompSection,
    )

    parts = urlparse(url)
    config = Config(
        broker=BrokerSection(name="pipeline", data_dir=data_dir),
        openwire=OpenWireSection(host=parts.hostname or "127.0.0.1", port=parts.port or 61616),
        stomp=StompSection(enabled=False),
        console=ConsoleSection(enabled=False),
    )
    ready = threading.Event()

    async def serve() -> None:
        broker = BrokerApp(config)
        await broker.start()
        ready.set()
        await asyncio.Event().wait()  # until the process ends

    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
    if not ready.wait(30):
        raise SystemExit("the embedded broker did not start")
    print(f"embedded dovecote broker at {url}", flush=True)


def send_sample_orders(url: str, count: int, seed: int = 7) -> None:
    """Orders one second of event time apart, ending now, with amounts from 1 to 500."""
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000)
    with ConnectionFactory(url + "?jms.useAsyncSend=true").create_connection() as connection:
        session = connection.create_session()
        producer = session.create_producer(session.queue("orders"))
        for i in range(count):
            order = {
                "order_id": i,
                "customer": rng.choice(CUSTOMERS),
                "amount": float(rng.randint(1, 500)),
                "ts": now_ms - (count - i) * 1000,
            }
            producer.send(Message(json.dumps(order)))
    print(f"sent {count} sample orders", flush=True)


def windows(orders: DataFrame, window: str, lateness: str) -> DataFrame:
    parsed = orders.select(F.from_json("text", ORDER_SCHEMA).alias("o")).select("o.*")
    timed = parsed.withColumn("event_time", F.timestamp_millis("ts"))
    return (
        timed.withWatermark("event_time", lateness)
        .groupBy(F.window("event_time", window).alias("window"), "customer")
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("total"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "customer",
            "orders",
            "total",
        )
    )


def wait_until_idle(query: Any, url: str) -> None:
    """--once: stop when the queue is drained and Spark's last batch had no rows: the one
    after the last orders that closes the windows the watermark has passed (Spark's
    availableNow trigger would stop before it), or, when none is due, Spark's report of an
    idle query. (The queue is drained only once the batch with its orders is done.)"""
    from dovecote.client.streams import StreamClient
    from dovecote.core.destinations import queue

    with StreamClient(url, queue("orders")) as stream:
        while True:
            time.sleep(0.25)
            if query.exception() is not None:
                raise SystemExit(f"the query failed: {query.exception()}")
            last = query.lastProgress
            if last is None or last["numInputRows"] or query.status["isTriggerActive"]:
                continue
            if not stream.plan(after=0).count:
                return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default="tcp://127.0.0.1:61616")
    parser.add_argument("--master", default=None, help="default: spark-submit's, or local[*]")
    parser.add_argument("--out", type=Path, default=Path("pipeline-out"))
    parser.add_argument("--orders", type=int, default=0, help="send this many sample orders")
    parser.add_argument("--window", default="10 seconds")
    parser.add_argument("--lateness", default="5 seconds", help="the watermark's delay")
    parser.add_argument("--alert-over", type=float, default=800.0)
    parser.add_argument("--once", action="store_true", help="process what is there, then stop")
    args = parser.parse_args()

    if not listening(args.broker):
        start_embedded_broker(args.broker, args.out / "broker")
    if args.orders:
        send_sample_orders(args.broker, args.orders)

    builder = SparkSession.builder.appName("dovecote-pipeline")
    if args.master:  # else spark-submit's --master, or local[*] under plain python
        builder = builder.master(args.master)
    spark = builder.config("spark.sql.shuffle.partitions", "2").getOrCreate()
    register(spark)

    orders = (
        spark.readStream.format("dovecote")
        .option("url", args.broker)
        .option("destination", "queue://orders")
        .option("numPartitions", "2")
        .option("maxMessagesPerBatch", "5000")
        .load()
    )
    out = args.out.resolve()
    alerts_sent = spark.sparkContext.accumulator(0)

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        # Its own directory per batch: a batch run again replaces its output.
        batch.write.mode("overwrite").parquet(str(out / "windows" / f"batch={batch_id}"))
        alerts = batch.where(F.col("total") > args.alert_over).select(
            F.to_json(F.struct("window_start", "window_end", "customer", "total")).alias("text"),
            F.concat_ws("/", F.col("window_start").cast("string"), "customer").alias(
                "correlation_id"
            ),
        )
        count = alerts.count()
        if count:
            alerts.write.format("dovecote").mode("append").option("url", args.broker).option(
                "destination", "topic://alerts"
            ).save()
            alerts_sent.add(count)
        batch.unpersist()

    writer = (
        windows(orders, args.window, args.lateness)
        .writeStream.outputMode("append")
        .foreachBatch(each_batch)
        .option("checkpointLocation", str(out / "checkpoint"))
    )
    query = writer.trigger(processingTime="1 second").start()
    try:
        if args.once:
            wait_until_idle(query, args.broker)
            query.stop()
        else:
            query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    result: Any = spark.read.parquet(str(out / "windows")) if (out / "windows").exists() else None
    closed = result.count() if result is not None else 0
    print(f"windows written: {closed}; alerts sent: {alerts_sent.value}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
