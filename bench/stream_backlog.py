"""A stream reader's batches over a long backlog (the Spark source's requests, docs/streams.md),
outside Spark: what one batch's plan (``Offsets``), read (``Blocks``) and removal (``Commit``)
take while most of the backlog waits behind it. A benchmark, not a test:

    .venv/bin/python bench/stream_backlog.py [--messages N] [--per-batch B] [--batches K]
                                             [--body BYTES] [--src A --src B ...]

The backlog (N persistent messages of BYTES of text, default 500,000 of 128) is appended in
transactions of 100,000 as the Spark writer appends them; then K batches of B messages (default
20 of 10,000) are planned, read and removed one after the other by one client, with a pause of
0.1 s after each (so that what the broker does after a removal's answer does not fall into the
next batch's figures). Each figure is the median over the batches, in milliseconds.

Each ``--src`` is a source tree (its ``src`` directory goes first on the broker's PYTHONPATH; the
default is the installed one): with several, each runs on a backlog of its own, one after the
other, in the same run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import pyarrow as pa  # type: ignore[import-untyped]  # noqa: E402

from brokers import running_broker  # noqa: E402
from dovecote.client import ConnectionFactory  # noqa: E402
from dovecote.client.streams import StreamAppender, StreamClient  # noqa: E402
from dovecote.core.destinations import queue  # noqa: E402
from dovecote.spark.blocks import append_block, append_blocks  # noqa: E402

TRANSACTION = 100_000


def fill(url: str, name: str, messages: int, body: int) -> None:
    """The backlog, as the Spark writer appends a partition: blocks in one transaction."""
    text = pa.array([f"{i:0{body}x}" for i in range(messages)])
    rows = pa.RecordBatch.from_arrays([text], names=["text"])
    with ConnectionFactory(url).create_connection() as connection:
        for start in range(0, messages, TRANSACTION):
            session = connection.create_session(transacted=True)
            appender = StreamAppender(session, queue(name))
            runs = append_blocks(rows.slice(start, TRANSACTION))
            for i, run in enumerate(runs):
                first_id = f"{connection.connection_id}:{start // TRANSACTION}:{i}:"
                appender.append(append_block(run, first_id, 4, 0, [], int(time.time() * 1000)))
            appender.finish()
            session.commit()
            session.close()


def batches(url: str, name: str, per_batch: int, count: int) -> dict[str, float]:
    """Median milliseconds of each step over ``count`` batches of ``per_batch``."""
    steps: dict[str, list[float]] = {"plan": [], "read": [], "commit": []}
    after = 0
    with StreamClient(url, queue(name)) as stream:
        for _ in range(count):
            started = time.perf_counter()
            plan = stream.plan(after=after, max_messages=per_batch)
            planned = time.perf_counter()
            blocks = sum(1 for _ in stream.iter_blocks(after, plan.end))
            read = time.perf_counter()
            stream.commit(plan.end)
            done = time.perf_counter()
            assert plan.count == per_batch and blocks > 0, "the backlog ran out"
            steps["plan"].append(planned - started)
            steps["read"].append(read - planned)
            steps["commit"].append(done - read)
            after = plan.end
            time.sleep(0.1)
    return {step: 1000 * median(times) for step, times in steps.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--per-batch", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--body", type=int, default=128)
    parser.add_argument("--src", action="append", default=[])
    args = parser.parse_args()
    if args.per_batch * args.batches > args.messages:
        parser.error("the batches would read more than the backlog holds")
    print(f"{args.messages:,} messages of {args.body} bytes, batches of {args.per_batch:,}"
          f" (medians over {args.batches}, ms)\n")  # fmt: skip
    print("| source | plan | read | commit | a batch |")
    print("|---|---:|---:|---:|---:|")
    for src in args.src or [""]:
        env = {"PYTHONPATH": str(Path(src) / "src")} if src else {}
        with tempfile.TemporaryDirectory() as tmp, running_broker(workdir=Path(tmp), env=env) as b:
            url = f"tcp://127.0.0.1:{b.openwire_port}"
            fill(url, "backlog", args.messages, args.body)
            ms = batches(url, "backlog", args.per_batch, args.batches)
        figures = " | ".join(f"{ms[step]:.1f}" for step in ("plan", "read", "commit"))
        print(f"| {src or 'installed'} | {figures} | {sum(ms.values()):.1f} |", flush=True)


if __name__ == "__main__":
    main()
