"""The command-line tools on the Python client (SPEC O2): produce, consume, browse, purge and
dstat against dovecote or ActiveMQ, with progress bars and rates. ``dovecote <tool> --help``.

purge and dstat use dovecote's admin API when given its URL (``--admin http://host:8161``).
Without it they work over the messaging protocol, so that they also serve an ActiveMQ: purge
drains the queue, and dstat asks ActiveMQ's statistics plugin (``ActiveMQ.Statistics.*``
destinations), which dovecote always answers and an ActiveMQ answers once its configuration
has ``<statisticsBrokerPlugin/>``."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dovecote.client import ConnectionFactory, Message
from dovecote.client.connection import Connection
from dovecote.core.destinations import Destination, parse_destination, queue, topic
from dovecote.core.errors import DovecoteError

console = Console(stderr=True)


def destination(text: str) -> Destination:
    """``queue://A``, ``topic://A``, or a bare name meaning a queue."""
    return parse_destination(text if "://" in text else f"queue://{text}")


@contextmanager
def connected(url: str) -> Iterator[Connection]:
    connection = ConnectionFactory(url).create_connection()
    connection.start()  # a JMS connection delivers nothing before start()
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


def purge(url: str, source: str, admin: str | None = None) -> str:
    """Remove every message now on a queue: through the admin API when given, else by
    consuming them (works on both brokers)."""
    if admin is not None:
        started = time.monotonic()
        target = destination(source)
        if not target.is_queue:
            raise DovecoteError(f"only queues can be purged, not {target}")
        answer = _admin_call(admin, f"/api/queues/{_quote(target.name)}/purge", method="POST")
        return _report("Purged", int(answer["purged"]), started)
    with connected(url) as connection:
        consumer = connection.create_session().create_consumer(destination(source))
        started = time.monotonic()
        removed = 0
        while consumer.receive(PURGE_IDLE_S) is not None:
            removed += 1
        return _report("Purged", removed, started)


PURGE_IDLE_S = 1.0
"""A queue is taken to be empty once nothing arrives for this long."""


STATISTICS_WAIT_S = 5.0
STATISTICS_END_OF_LIST = "ActiveMQ.Statistics.Destination.List.End.With.Null"
DSTAT_COLUMNS = (
    ("Name", "name"), ("Queue Size", "size"), ("Producer #", "producers"),
    ("Consumer #", "consumers"), ("Enqueue #", "enqueued"), ("Dequeue #", "dequeued"),
    ("Inflight #", "inflight"), ("Memory %", "memory_percent"),
)  # fmt: skip
_FROM_PLUGIN = {
    "size": "size", "producers": "producerCount", "consumers": "consumerCount",
    "enqueued": "enqueueCount", "dequeued": "dequeueCount", "inflight": "inflightCount",
    "memory_percent": "memoryPercentUsage",
}  # fmt: skip


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _admin_call(admin: str, path: str, method: str = "GET") -> Any:
    # JSON: the admin API refuses a POST a cross-site form could send (docs/admin-api.md).
    headers = {"Content-Type": "application/json"}
    parts = urllib.parse.urlsplit(admin)
    if parts.username is not None:  # http://user:password@host:8161 logs in (HTTP Basic)
        unquote = urllib.parse.unquote
        login = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(login.encode()).decode()
        admin = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    request = urllib.request.Request(admin.rstrip("/") + path, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = json.loads(exc.read() or b"{}").get("error", exc.reason)
        raise DovecoteError(f"admin API {admin}: {detail}") from None
    except urllib.error.URLError as exc:
        raise DovecoteError(f"cannot reach the admin API at {admin}: {exc.reason}") from None


def _rows_from_admin(admin: str, kind: str) -> list[dict[str, object]]:
    rows = _admin_call(admin, "/api/destinations" + ("" if kind == "all" else f"?type={kind}"))
    assert isinstance(rows, list)
    for row in rows:
        limit, used = int(str(row["memory_limit"])), int(str(row["memory_usage"]))
        row["memory_percent"] = 100 * used // limit if limit > 0 else 0
    return rows


def _rows_from_plugin(url: str, kind: str) -> list[dict[str, object]]:
    """Ask the statistics plugin: one map message per destination, then an empty one."""
    rows: list[dict[str, object]] = []
    with connected(url) as connection:
        session = connection.create_session()
        reply_to = session.create_temporary_queue()
        replies = session.create_consumer(reply_to)
        producer = session.create_producer()
        for kind_name, make in (("queue", queue), ("topic", topic)):
            if kind not in ("all", kind_name):
                continue
            request = Message(
                "",
                reply_to=reply_to,
                persistent=False,
                properties={"ActiveMQ.Statistics.Destination.List.End.With.Null": True},
            )
            producer.send(request, destination=make("ActiveMQ.Statistics.Destination.>"))
            while True:
                reply = replies.receive(STATISTICS_WAIT_S)
                if reply is None:
                    raise DovecoteError(
                        f"the broker at {url} did not answer on ActiveMQ.Statistics.Destination;"
                        " an ActiveMQ needs <statisticsBrokerPlugin/> in its configuration"
                        " (or use --admin with dovecote's admin API)"
                    )
                if not isinstance(reply.body, dict) or not reply.body:
                    break
                stats = reply.body
                name = str(stats["destinationName"])
                row: dict[str, object] = {"name": name.split("://", 1)[-1], "type": kind_name}
                row.update({ours: stats.get(theirs, 0) for ours, theirs in _FROM_PLUGIN.items()})
                rows.append(row)
    return rows


def dstat(url: str, admin: str | None, kind: str, interval: float) -> list[str]:
    """A table of destinations like ActiveMQ's ``activemq dstat``; with an interval, two
    samples and the enqueue and dequeue rates between them."""
    if kind not in ("all", "queue", "topic"):
        raise DovecoteError(f"unknown destination type {kind!r}: use all, queue or topic")

    def sample() -> list[dict[str, object]]:
        rows = _rows_from_admin(admin, kind) if admin else _rows_from_plugin(url, kind)
        return [r for r in rows if not str(r["name"]).startswith("ActiveMQ.Advisory.")]

    rows = sample()
    columns = list(DSTAT_COLUMNS)
    if interval > 0:
        before = {(r["type"], r["name"]): r for r in rows}
        time.sleep(interval)
        rows = sample()
        for row in rows:
            old = before.get((row["type"], row["name"]), {})
            for field in ("enqueued", "dequeued"):
                delta = int(row[field]) - int(old.get(field, 0))  # type: ignore[call-overload]
                row[f"{field}_rate"] = f"{delta / interval:,.1f}"
        columns += [("Enqueue/s", "enqueued_rate"), ("Dequeue/s", "dequeued_rate")]
    rows.sort(key=lambda r: (str(r["type"]), str(r["name"])))
    cells = [[str(r.get(key, "")) for _, key in columns] for r in rows]
    widths = [
        max([len(title)] + [len(c[i]) for c in cells]) for i, (title, _) in enumerate(columns)
    ]
    lines = [
        "  ".join(
            title.rjust(w) if i else title.ljust(w)
            for i, ((title, _), w) in enumerate(zip(columns, widths, strict=True))
        )
    ]
    for c in cells:
        lines.append(
            "  ".join(
                v.rjust(w) if i else v.ljust(w)
                for i, (v, w) in enumerate(zip(c, widths, strict=True))
            )
        )
    return lines
