"""A Spark driver for the exactly-once tests: stream a dovecote destination into a Parquet
sink with a checkpoint, until SIGTERM (or until killed, which is the point).

    python tests/spark/driver.py URL DESTINATION SINK CHECKPOINT [PARTITIONS] [MAX_PER_BATCH]
"""

from __future__ import annotations

import signal
import sys
import threading

from sessions import local_session


def main() -> None:
    url, destination, sink, checkpoint = sys.argv[1:5]
    partitions = sys.argv[5] if len(sys.argv) > 5 else "2"
    most = sys.argv[6] if len(sys.argv) > 6 else "100"
    spark = local_session("dovecote-exactly-once")
    stream = (
        spark.readStream.format("dovecote")
        .option("url", url)
        .option("destination", destination)
        .option("numPartitions", partitions)
        .option("maxMessagesPerBatch", most)
        .load()
    )
    query = (
        stream.writeStream.format("parquet")
        .option("path", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("driver streaming", flush=True)
    while not stop.wait(0.2):
        if not query.isActive:
            raise SystemExit(f"query ended: {query.exception()}")
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
