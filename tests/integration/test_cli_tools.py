"""dovecote's command-line tools (SPEC O2) on the Python client, against dovecote and
against a real ActiveMQ 5.17: the counts they report are the counts that moved."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from activemq import running_activemq
from brokers import running_broker
from dovecote.client import ConnectionFactory
from dovecote.core.destinations import queue


@dataclass
class Target:
    url: str
    admin: str | None
    """dovecote's admin API; ActiveMQ's package has no web console."""


@pytest.fixture(scope="module", params=["dovecote", "activemq"])
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    if request.param == "dovecote":
        with running_broker(workdir=tmp_path_factory.mktemp("tools")) as broker:
            yield Target(
                f"tcp://127.0.0.1:{broker.openwire_port}",
                f"http://127.0.0.1:{broker.console_port}",
            )
    else:
        with running_activemq() as amq:
            yield Target(f"tcp://127.0.0.1:{amq.openwire_port}", None)


@pytest.fixture
def url(target: Target) -> str:
    return target.url


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dovecote", *args], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip


def tool(*args: str) -> str:
    result = run_tool(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def dstat_row(output: str, name: str) -> dict[str, int]:
    """The dstat line for ``name``, by column title."""
    header, *lines = output.strip().splitlines()
    titles = [t.strip() for t in header.split("  ") if t.strip()]
    for line in lines:
        cells = line.split()
        if cells[0] == name:
            return dict(zip(titles[1:], map(int, cells[1 : len(titles)]), strict=True))
    raise AssertionError(f"{name} not in dstat output:\n{output}")


def test_produce_browse_consume_purge(url: str) -> None:
    queue = f"queue://tools.{uuid.uuid4().hex[:8]}"
    # 300: ActiveMQ's browser shows at most maxBrowsePageSize (400) messages.
    assert "Produced: 300 messages" in tool("produce", queue, "--url", url, "--count", "300",
                                            "--size", "256", "--no-persistent")  # fmt: skip
    browsed = tool("browse", queue, "--url", url, "--limit", "3")
    assert "Browsed: 300 messages" in browsed
    assert len(browsed.strip().splitlines()) == 4  # three messages shown, then the count
    assert "Consumed: 100 messages" in tool("consume", queue, "--url", url, "--count", "100")
    assert "Purged: 200 messages" in tool("purge", queue, "--url", url)
    assert "Browsed: 0 messages" in tool("browse", queue, "--url", url)


def test_bad_url_option_is_named() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dovecote", "produce", "q", "--url", "tcp://127.0.0.1:1?jms.nope=1"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1 and "jms.nope" in result.stderr


def test_dstat_counts_what_moved(target: Target) -> None:
    """Over the statistics plugin (both brokers) and the admin API (dovecote): the sizes and
    counters dstat shows are the messages sent, consumed and held, and a consumer shows."""
    name = f"dstat.{uuid.uuid4().hex[:8]}"
    tool("produce", name, "--url", target.url, "--count", "30", "--size", "64")
    tool("consume", name, "--url", target.url, "--count", "10")
    sources = [("--url", target.url)] + ([("--admin", target.admin)] if target.admin else [])
    for option, value in sources:
        row = dstat_row(tool("dstat", "queue", "--url", target.url, option, value), name)
        assert row["Queue Size"] == 20, (option, row)
        assert row["Enqueue #"] == 30, (option, row)
        assert row["Dequeue #"] == 10, (option, row)
        assert row["Consumer #"] == 0, (option, row)
    with ConnectionFactory(target.url).create_connection() as connection:
        connection.start()
        session = connection.create_session()
        consumer = session.create_consumer(queue(name))
        assert consumer.receive(10) is not None
        row = dstat_row(tool("dstat", "--url", target.url), name)
        assert row["Consumer #"] == 1
        assert row["Dequeue #"] in (10, 11)  # auto-ack may still be on its way
        assert row["Queue Size"] + row["Dequeue #"] == 30


def test_dstat_interval_shows_rates(target: Target) -> None:
    out = tool("dstat", "queue", "--url", target.url, "--interval", "0.2")
    assert "Enqueue/s" in out.splitlines()[0]


def test_purge_through_the_admin_api(tmp_path_factory: pytest.TempPathFactory) -> None:
    """dovecote only: ActiveMQ's Debian package has no web console (purge drains it there,
    tested above)."""
    with running_broker(workdir=tmp_path_factory.mktemp("admin-purge")) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        admin = f"http://127.0.0.1:{broker.console_port}"
        name = f"adminpurge.{uuid.uuid4().hex[:8]}"
        tool("produce", name, "--url", url, "--count", "40", "--size", "64")
        assert "Purged: 40 messages" in tool("purge", name, "--url", url, "--admin", admin)
        assert "Browsed: 0 messages" in tool("browse", name, "--url", url)
        missing = run_tool("purge", "nosuch.queue", "--admin", admin)
        assert missing.returncode == 1 and "no such queue: queue://nosuch.queue" in missing.stderr


def test_dstat_without_an_answering_broker_names_the_problem(target: Target) -> None:
    unreachable = run_tool("dstat", "--admin", "http://127.0.0.1:1")
    assert unreachable.returncode == 1
    assert "cannot reach the admin API at http://127.0.0.1:1" in unreachable.stderr
    bad = run_tool("dstat", "queues", "--url", target.url)
    assert bad.returncode == 1 and "unknown destination type 'queues'" in bad.stderr
