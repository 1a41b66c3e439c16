"""The command-line tools on the Python client (SPEC O2): produce, consume, browse and purge
against dovecote or ActiveMQ, with progress bars and rates. ``dovecote <tool> --help``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dovecote.client import ConnectionFactory, Message
from dovecote.client.connection import Connection
from dovecote.core.destinations import Destination, parse_destination

console = Console(stderr=True)


def destination(text: str) -> Destination:
    """``queue://A``, ``topic://A``, or a bare name meaning a queue."""
    return parse_destination(text if "://" in text else f"queue://{text}")


@contextmanager
def connected(url: str) -> Iterator[Connection]:
    connection = ConnectionFactory(url).create_connection()
    try:
        yield connection
    finally:
        connection.close()


def _progress(total: int | None, verb: str) -> Progress:
    return Progress(
        TextColumn(f"[bold]{verb}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:>10} msg/s"), TimeElapsedColumn(),
        console=console, transient=True,
    )  # fmt: skip


def _report(verb: str, count: int, started: float) -> str:
    elapsed = max(time.monotonic() - started, 1e-9)
    return f"{verb}: {count} messages in {elapsed:.2f}s ({count / elapsed:,.0f} msg/s)"


def produce(url: str, target: str, count: int, size: int, persistent: bool) -> str:
    body = "x" * size
    with connected(url) as connection:
        session = connection.create_session()
        producer = session.create_producer(destination(target))
        started = time.monotonic()
        with _progress(count, "produce") as progress:
            task = progress.add_task("produce", total=count, rate="")
            for i in range(count):
                producer.send(Message(body, properties={"seq": i}), persistent=persistent)
                if i % 100 == 99 or i == count - 1:
                    rate = (i + 1) / max(time.monotonic() - started, 1e-9)
                    progress.update(task, completed=i + 1, rate=f"{rate:,.0f}")
        return _report("Produced", count, started)


def consume(url: str, source: str, count: int, timeout: float) -> str:
    with connected(url) as connection:
        consumer = connection.create_session().create_consumer(destination(source))
        started = time.monotonic()
        got = 0
        with _progress(count, "consume") as progress:
            task = progress.add_task("consume", total=count, rate="")
            while got < count and consumer.receive(timeout) is not None:
                got += 1
                if got % 100 == 0 or got == count:
                    rate = got / max(time.monotonic() - started, 1e-9)
                    progress.update(task, completed=got, rate=f"{rate:,.0f}")
        return _report("Consumed", got, started)


def browse(url: str, source: str, limit: int) -> tuple[list[str], str]:
    with connected(url) as connection:
        session = connection.create_session()
        started = time.monotonic()
        shown: list[str] = []
        total = 0
        for message in session.browse(destination(source)):
            total += 1
            if len(shown) < limit:
                body = message.body if isinstance(message.body, str) else repr(message.body)
                shown.append(f"{message.message_id}  {body[:60]}")
        return shown, _report("Browsed", total, started)


def purge(url: str, source: str) -> str:
    """Remove every message now on a queue (by consuming them; works on both brokers)."""
    with connected(url) as connection:
        consumer = connection.create_session().create_consumer(destination(source))
        started = time.monotonic()
        removed = 0
        while consumer.receive(PURGE_IDLE_S) is not None:
            removed += 1
        return _report("Purged", removed, started)


PURGE_IDLE_S = 1.0
"""A queue is taken to be empty once nothing arrives for this long."""
