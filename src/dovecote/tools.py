"""The command-line tools on the Python client (compatibility O2): produce, consume, browse, purge
and dstat against dovecote or ActiveMQ, with progress bars and rates. ``dovecote <tool> --help``.

purge and dstat use dovecote's admin API when given its URL (``--admin http://host:8161``).
Without it they work over the messaging protocol, so that they also serve an ActiveMQ: purge
drains the queue, and dstat asks ActiveMQ's statistics plugin (``ActiveMQ.Statistics.*``
destinations), which dovecote always answers and an ActiveMQ answers once its configuration
has ``<statisticsBrokerPlugin/>``."""

from __future__ import annotations

import base64
import json
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from dovecote.client import ConnectionFactory, JavaInt, JMSError, Message
from dovecote.client.connection import Connection
from dovecote.core.destinations import Destination, parse_destination, queue, topic
from dovecote.core.errors import DovecoteError

console = Console(stderr=True)
POLL_S = 0.1
"""How long a wait for the broker lasts before the tool looks whether Ctrl-C was pressed."""


@dataclass
class Outcome:
    """What a tool did: a table to show (optional), then its one-line summary."""

    summary: str
    table: Table | None = None
    interrupted: bool = False
    """Ctrl-C ended the tool early; the summary says what moved until then."""


class CtrlC:
    """While active, Ctrl-C (SIGINT) sets ``pressed`` for the tool's loop to see between two
    messages, so that no frame is cut in half and the connection closes as usual; a second
    Ctrl-C interrupts at once (KeyboardInterrupt)."""

    def __init__(self) -> None:
        self.pressed = False
        self._previous: Any = None

    def __enter__(self) -> CtrlC:
        self._previous = signal.signal(signal.SIGINT, self._press)
        return self

    def _press(self, signum: int, frame: FrameType | None) -> None:
        self.pressed = True
        signal.signal(signal.SIGINT, self._previous)

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.pressed and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(POLL_S, left))


def destination(text: str) -> Destination:
    """``queue://A``, ``topic://A``, or a bare name meaning a queue."""
    return parse_destination(text if "://" in text else f"queue://{text}")


@contextmanager
def connected(url: str, browser_prefetch: int | None = None) -> Iterator[Connection]:
    """A started connection to ``url``; a failure to connect names the URL."""
    try:
        connection = ConnectionFactory(url).create_connection()
    except (OSError, JMSError) as exc:
        raise DovecoteError(f"cannot connect to {url}: {_reason(exc)}") from None
    if browser_prefetch is not None:  # a browser is sent no more than it will show
        connection.options.prefetchPolicy.queueBrowserPrefetch = browser_prefetch
    try:
        connection.start()  # a JMS connection delivers nothing before start()
        yield connection
    finally:
        connection.close()


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def _progress(verb: str) -> Progress:
    return Progress(
        TextColumn(f"[bold]{verb}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:>10} msg/s"), TimeElapsedColumn(),
        console=console, transient=True,
    )  # fmt: skip


def _advance(progress: Progress, task: TaskID, done: int, count: int, started: float) -> None:
    if done % 100 == 0 or done == count:  # the bar and the rate, every 100 messages
        rate = done / max(time.monotonic() - started, 1e-9)
        progress.update(task, completed=done, rate=f"{rate:,.0f}")


def _report(verb: str, count: int, started: float, interrupted: bool = False) -> str:
    elapsed = max(time.monotonic() - started, 1e-9)
    end = ", interrupted" if interrupted else ""
    return f"{verb}: {count} messages in {elapsed:.2f}s ({count / elapsed:,.0f} msg/s){end}"


def table(titles: Sequence[str], rows: Sequence[Sequence[str]], numeric: int = 1) -> Table:
    """A rich table; columns from ``numeric`` on are right-aligned. Without a terminal it
    has no lines, columns set apart by two spaces, for scripts to read."""
    grid = Table(box=box.SIMPLE_HEAD if sys.stdout.isatty() else None, pad_edge=False)
    for i, title in enumerate(titles):
        grid.add_column(title, justify="right" if i >= numeric else "left", no_wrap=i > 0)
    for row in rows:
        grid.add_row(*row)
    return grid


# -- produce: the body, headers and properties from the command line ----------------------

HEADERS = {
    "correlation-id": "correlation_id", "JMSCorrelationID": "correlation_id",
    "type": "type", "JMSType": "type", "reply-to": "reply_to", "JMSReplyTo": "reply_to",
    "priority": "priority", "JMSPriority": "priority",
    "time-to-live": "time_to_live", "JMSXGroupID": "JMSXGroupID", "group-id": "JMSXGroupID",
}  # fmt: skip
PROPERTY_TYPES: dict[str, Any] = {
    "string": str, "int": JavaInt, "long": int, "double": float,
    "bool": lambda v: {"true": True, "false": False}[v.lower()],
}  # fmt: skip
"""-P NAME:TYPE=VALUE: the Java type a property travels as (string when none is given)."""


def _pairs(items: Sequence[str], what: str) -> Iterator[tuple[str, str]]:
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise DovecoteError(f"{what} {item!r}: write it as NAME=VALUE")
        yield name, value


def message_template(
    body: str | bytes, headers: Sequence[str], properties: Sequence[str]
) -> tuple[dict[str, Any], int | None]:
    """The fields of Message every produced message has, and the time to live (ms)."""
    fields: dict[str, Any] = {"body": body, "properties": {}}
    ttl = None
    for name, value in _pairs(headers, "header"):
        key = HEADERS.get(name)
        if key is None:
            known = ", ".join(sorted(HEADERS))
            raise DovecoteError(f"unknown header {name!r}: the headers are {known}")
        try:
            if key == "priority":
                fields[key] = int(value)
            elif key == "time_to_live":
                ttl = int(value)
            elif key == "reply_to":
                fields[key] = destination(value)
            elif key == "JMSXGroupID":
                fields["properties"][key] = value
            else:
                fields[key] = value
        except ValueError as exc:
            raise DovecoteError(f"header {name}={value!r}: {exc}") from None
    for spec, value in _pairs(properties, "property"):
        name, _, kind = spec.partition(":")
        convert = PROPERTY_TYPES.get(kind or "string")
        if convert is None:
            raise DovecoteError(f"property {spec}: the types are {', '.join(PROPERTY_TYPES)}")
        try:
            fields["properties"][name] = convert(value)
        except (ValueError, KeyError):
            raise DovecoteError(f"property {spec}={value!r} is not a {kind}") from None
    return fields, ttl


def body_of(text: str | None, file: Path | None, size: int) -> str | bytes:
    """--body, else --file (text when it is UTF-8, else bytes), else SIZE characters."""
    if text is not None:
        return text
    if file is not None:
        data = file.read_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data
    return "x" * size


def produce(url: str, target: str, count: int, persistent: bool, body: str | bytes,
            headers: Sequence[str] = (), properties: Sequence[str] = ()) -> Outcome:  # fmt: skip
    template, ttl = message_template(body, headers, properties)
    sent = 0
    with connected(url) as connection, CtrlC() as ctrl_c, _progress("produce") as progress:
        producer = connection.create_session().create_producer(destination(target))
        started = time.monotonic()
        task = progress.add_task("produce", total=count, rate="")
        while sent < count and not ctrl_c.pressed:
            message = Message(**{**template, "properties": {**template["properties"]}})
            message.properties.setdefault("seq", sent)
            # As JMS: send's own priority and time to live win over the message's fields.
            producer.send(
                message, persistent=persistent, priority=message.priority, time_to_live=ttl
            )
            sent += 1
            _advance(progress, task, sent, count, started)
        return Outcome(_report("Produced", sent, started, ctrl_c.pressed),
                       interrupted=ctrl_c.pressed)  # fmt: skip


def _receive(consumer: Any, ctrl_c: CtrlC, idle_s: float) -> Message | None:
    """The next message, None after ``idle_s`` without one or once Ctrl-C is pressed."""
    deadline = time.monotonic() + idle_s
    while not ctrl_c.pressed:
        wait = min(POLL_S, max(deadline - time.monotonic(), 0))
        message: Message | None = consumer.receive(wait)
        if message is not None or time.monotonic() >= deadline:
            return message
    return None


def consume(url: str, source: str, count: int, timeout: float) -> Outcome:
    got = 0
    with connected(url) as connection, CtrlC() as ctrl_c, _progress("consume") as progress:
        consumer = connection.create_session().create_consumer(destination(source))
        started = time.monotonic()
        task = progress.add_task("consume", total=count, rate="")
        while got < count and _receive(consumer, ctrl_c, timeout) is not None:
            got += 1
            _advance(progress, task, got, count, started)
        return Outcome(_report("Consumed", got, started, ctrl_c.pressed),
                       interrupted=ctrl_c.pressed)  # fmt: skip


BROWSE_COLUMNS = ("Message ID", "Timestamp", "Properties", "Body")


def browse(url: str, source: str, limit: int) -> Outcome:
    """The first ``limit`` messages of a queue (0: all of them); the browser is sent no
    more than that (its prefetch), so a long queue costs what is shown."""
    rows: list[list[str]] = []
    with connected(url, browser_prefetch=limit or None) as connection, CtrlC() as ctrl_c:
        started = time.monotonic()
        browser = connection.create_session().browse(destination(source))
        try:
            for message in browser:
                rows.append(_browse_row(message))
                if len(rows) == limit or ctrl_c.pressed:
                    break
        finally:
            browser.close()  # type: ignore[attr-defined]
        more = " (--limit reached)" if limit and len(rows) == limit else ""
        summary = _report("Browsed", len(rows), started, ctrl_c.pressed) + more
        return Outcome(summary, table(BROWSE_COLUMNS, rows, numeric=99),
                       interrupted=ctrl_c.pressed)  # fmt: skip


def _browse_row(message: Message) -> list[str]:
    body = message.body if isinstance(message.body, str) else repr(message.body)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(message.timestamp / 1000))
    properties = ", ".join(f"{k}={v}" for k, v in message.properties.items())
    return [str(message.message_id), stamp, properties[:40], body[:60]]


def purge(url: str, source: str, admin: str | None = None) -> Outcome:
    """Remove every message now on a queue: through the admin API when given, else by
    consuming them (works on both brokers)."""
    if admin is not None:
        started = time.monotonic()
        target = destination(source)
        if not target.is_queue:
            raise DovecoteError(f"only queues can be purged, not {target}")
        answer = _admin_call(admin, f"/api/queues/{_quote(target.name)}/purge", method="POST")
        return Outcome(_report("Purged", int(answer["purged"]), started))
    removed = 0
    with connected(url) as connection, CtrlC() as ctrl_c:
        consumer = connection.create_session().create_consumer(destination(source))
        started = time.monotonic()
        while _receive(consumer, ctrl_c, PURGE_IDLE_S) is not None:
            removed += 1
        return Outcome(_report("Purged", removed, started, ctrl_c.pressed),
                       interrupted=ctrl_c.pressed)  # fmt: skip


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


def dstat(url: str, admin: str | None, kind: str, interval: float) -> Outcome:
    """A table of destinations like ActiveMQ's ``activemq dstat``; with an interval, two
    samples and the enqueue and dequeue rates between them (Ctrl-C while waiting: the first
    sample alone)."""
    if kind not in ("all", "queue", "topic"):
        raise DovecoteError(f"unknown destination type {kind!r}: use all, queue or topic")

    def sample() -> list[dict[str, object]]:
        rows = _rows_from_admin(admin, kind) if admin else _rows_from_plugin(url, kind)
        return [r for r in rows if not str(r["name"]).startswith("ActiveMQ.Advisory.")]

    started = time.monotonic()
    with CtrlC() as ctrl_c:
        rows = sample()
        ctrl_c.sleep(interval)
    interrupted = ctrl_c.pressed
    columns = list(DSTAT_COLUMNS)
    if interval > 0 and not interrupted:
        before = {(r["type"], r["name"]): r for r in rows}
        rows = sample()
        for row in rows:
            old = before.get((row["type"], row["name"]), {})
            for name in ("enqueued", "dequeued"):
                delta = int(str(row[name])) - int(str(old.get(name, 0)))
                row[f"{name}_rate"] = f"{delta / interval:,.1f}"
        columns += [("Enqueue/s", "enqueued_rate"), ("Dequeue/s", "dequeued_rate")]
    rows.sort(key=lambda r: (str(r["type"]), str(r["name"])))
    cells = [[str(r.get(key, "")) for _, key in columns] for r in rows]
    elapsed = time.monotonic() - started
    end = ", interrupted" if interrupted else ""
    summary = f"dstat: {len(rows)} destinations in {elapsed:.2f}s{end}"
    return Outcome(summary, table([title for title, _ in columns], cells), interrupted)
