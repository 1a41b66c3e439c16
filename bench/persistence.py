"""Persistent send throughput by store and by sending pattern (issue: persistence).

For each store (journal, SQLite, PostgreSQL, journaled SQL on SQLite, LevelDB) a broker
process is started on a fresh directory, and three workloads send persistent 1 KiB messages
over STOMP:

- sync x1: one producer, a RECEIPT per message (each send waits for its own fsync),
- sync x8: eight producers at once, a RECEIPT per message (they share fsyncs: group commit),
- tx x1: one producer, transactions of 100 sends and a RECEIPT on each COMMIT (the seeds'
  advice: batch persistent sends in transactions).

Prints messages per second and every figure as a ratio of the journal's sync x1, all from
one run. Run: .venv/bin/python bench/persistence.py [messages-per-workload]
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from brokers import running_broker
from dovecote.protocol.stomp import Frame
from postgres import postgres_server
from stomplink import Link

BODY = b"x" * 1024


def sync_sends(port: int, count: int, tag: str) -> None:
    link = Link(port)
    for i in range(count):
        link.send(Frame("SEND", (("destination", "/queue/bench"), ("persistent", "true"),
                                 ("receipt", f"{tag}{i}")), BODY))  # fmt: skip
        assert link.read().command == "RECEIPT"
    link.close()


def transacted(port: int, count: int, batch: int = 100) -> None:
    link = Link(port)
    for b in range(count // batch):
        link.send(Frame("BEGIN", (("transaction", f"t{b}"),)))
        for _ in range(batch):
            link.send(Frame("SEND", (("destination", "/queue/bench"), ("persistent", "true"),
                                     ("transaction", f"t{b}")), BODY))  # fmt: skip
        link.send(Frame("COMMIT", (("transaction", f"t{b}"), ("receipt", f"c{b}"))))
        assert link.read().command == "RECEIPT"
    link.close()


def timed(work: Callable[[], None], count: int) -> float:
    started = time.monotonic()
    work()
    return count / (time.monotonic() - started)


def run_workloads(port: int, count: int) -> dict[str, float]:
    results = {"sync x1": timed(lambda: sync_sends(port, count, "a"), count)}

    def eight() -> None:
        threads = [threading.Thread(target=sync_sends, args=(port, count // 8, f"p{n}-"))
                   for n in range(8)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    results["sync x8"] = timed(eight, count // 8 * 8)
    results["tx x1"] = timed(lambda: transacted(port, count), count // 100 * 100)
    return results


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    table: dict[str, dict[str, float]] = {}
    with ExitStack() as stack:
        pg_url = stack.enter_context(postgres_server())
        stores = {
            "journal": '[store]\nkind = "journal"\n',
            "sqlite": '[store]\nkind = "sql"\n',
            "postgresql": f'[store]\nkind = "sql"\nurl = "{pg_url}"\n',
            "journaled-sql": '[store]\nkind = "journaled-sql"\n',
            "leveldb": '[store]\nkind = "leveldb"\n',
        }
        for name, config in stores.items():
            with tempfile.TemporaryDirectory() as tmp:
                config += "[usage]\nmemory_limit = 0\n"
                with running_broker(config, workdir=Path(tmp)) as broker:
                    table[name] = run_workloads(broker.stomp_port, count)
            print(f"measured {name}", file=sys.stderr)
    base = table["journal"]["sync x1"]
    workloads = list(next(iter(table.values())))
    print(f"persistent 1 KiB sends, {count} per workload; ratio = msg/s / journal sync x1\n")
    print("| store | " + " | ".join(workloads) + " |")
    print("| --- |" + " --- |" * len(workloads))
    for name, results in table.items():
        cells = [f"{results[w]:,.0f} msg/s ({results[w] / base:.2f}x)" for w in workloads]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
