"""dovecote's command-line tools (compatibility O2) on the Python client, against dovecote and
against a real ActiveMQ 5.17: the counts they report are the counts that moved; what
produce sends (body, file, headers, properties) is what a consumer gets; browse reads no
more than it shows; Ctrl-C (a real SIGINT) ends a tool with its summary line, exit 130."""

from __future__ import annotations

import http.server
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from activemq import running_activemq
from brokers import BrokerProcess, running_broker
from dovecote.client import ConnectionFactory, JavaInt
from dovecote.core.destinations import queue
from tcpproxy import TcpProxy


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
    assert "Browsed: 3 messages" in browsed and "(--limit reached)" in browsed
    header, *shown, _ = browsed.strip().splitlines()
    assert header.split() == ["Message", "ID", "Timestamp", "Properties", "Body"]
    assert len(shown) == 3 and all("x" * 60 in line for line in shown)
    assert "Browsed: 300 messages" in tool("browse", queue, "--url", url, "--limit", "0")
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


def received(url: str, name: str, n: int) -> list:  # type: ignore[type-arg]
    with ConnectionFactory(url).create_connection() as connection:
        connection.start()
        consumer = connection.create_session().create_consumer(queue(name))
        return [consumer.receive(10) for _ in range(n)]


def test_produce_takes_a_body_a_file_headers_and_properties(url: str, tmp_path: Path) -> None:
    name = f"produce.{uuid.uuid4().hex[:8]}"
    tool("produce", name, "--url", url, "--count", "2", "--body", "hello there",
         "-H", "correlation-id=order-7", "-H", "type=greeting", "-H", "priority=7",
         "-H", "reply-to=queue://answers", "-H", "group-id=g1",
         "-P", "color=red", "-P", "weight:int=12", "-P", "ok:bool=true",
         "-P", "ratio:double=0.5")  # fmt: skip
    binary = tmp_path / "payload.bin"
    binary.write_bytes(bytes(range(256)))
    tool("produce", name, "--url", url, "--count", "1", "--file", str(binary))
    first, second, from_file = received(url, name, 3)
    assert first.body == "hello there" and second.body == "hello there"
    assert first.correlation_id == "order-7" and first.type == "greeting"
    assert first.priority == 7 and first.reply_to == queue("answers")
    assert first.properties["color"] == "red"
    assert first.properties["weight"] == 12 and isinstance(first.properties["weight"], JavaInt)
    assert first.properties["ok"] is True and first.properties["ratio"] == 0.5
    assert first.properties["JMSXGroupID"] == "g1"
    assert (first.properties["seq"], second.properties["seq"]) == (0, 1)
    assert from_file.body == bytes(range(256))


def test_produce_names_a_bad_header_or_property() -> None:
    bad = run_tool("produce", "q", "-H", "colour=red")
    assert bad.returncode == 1 and "unknown header 'colour'" in bad.stderr
    bad = run_tool("produce", "q", "-P", "n:int=many")
    assert bad.returncode == 1 and "property n:int='many' is not a int" in bad.stderr
    bad = run_tool("produce", "q", "-P", "novalue")
    assert bad.returncode == 1 and "write it as NAME=VALUE" in bad.stderr
    bad = run_tool("browse", "q", "--limit", "-1")
    assert bad.returncode == 2 and "argument --limit: invalid count value: '-1'" in bad.stderr
    bad = run_tool("produce", "q", "--file", "/nonexistent/body.txt")
    assert bad.returncode == 1
    assert bad.stderr == "dovecote: cannot read /nonexistent/body.txt: No such file or directory\n"


def test_browse_reads_only_what_it_shows(url: str) -> None:
    """2,000 messages of 4 KiB (8 MiB) on the queue: browsing 5 takes a few KiB from the
    broker (the browser's prefetch is the limit), not the queue's 8 MiB (nor the client's
    default browser prefetch of 500 messages, 2 MiB)."""
    name = f"browse.{uuid.uuid4().hex[:8]}"
    tool("produce", name, "--url", url, "--count", "2000", "--size", "4096", "--no-persistent")
    from_broker = [0]

    def count(from_client: bool, data: bytes) -> bytes:
        from_broker[0] += 0 if from_client else len(data)
        return data

    proxy = TcpProxy(int(url.rsplit(":", 1)[1]), lambda: count)
    try:
        out = tool("browse", name, "--url", f"tcp://127.0.0.1:{proxy.port}", "--limit", "5")
    finally:
        proxy.close()
    assert "Browsed: 5 messages" in out
    assert from_broker[0] < 25 * 4096, from_broker[0]
    assert "Queue Size" in (table := tool("dstat", "queue", "--url", url))
    assert dstat_row(table, name)["Queue Size"] == 2000


def test_a_connection_error_names_the_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: refused
        dead = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
        for command in (["produce", "q"], ["consume", "q"], ["browse", "q"], ["purge", "q"],
                        ["dstat"]):  # fmt: skip
            result = run_tool(*command, "--url", dead)
            assert result.returncode == 1, (command, result.stderr)
            assert result.stderr.splitlines() == [
                f"dovecote: cannot connect to {dead}: Connection refused"
            ], command


# -- Ctrl-C: a real SIGINT to the tool's process -----------------------------------------


@pytest.fixture(scope="module")
def dovecote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(workdir=tmp_path_factory.mktemp("ctrl-c")) as broker:
        yield broker


def queue_row(broker: BrokerProcess, name: str) -> dict[str, int]:
    api = f"http://127.0.0.1:{broker.console_port}/api/destinations?type=queue"
    with urllib.request.urlopen(api, timeout=10) as answer:
        rows = json.loads(answer.read())
    return next((r for r in rows if r["name"] == name), {"size": 0, "consumers": 0})


def start_tool(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "dovecote", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def wait_for(condition: object, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def interrupt(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGINT, as Ctrl-C in a terminal; the tool must end within seconds."""
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err, err
    return out, err


def test_ctrl_c_ends_produce_with_what_was_sent(dovecote: BrokerProcess) -> None:
    name = f"ctrlc.produce.{uuid.uuid4().hex[:8]}"
    url = f"tcp://127.0.0.1:{dovecote.openwire_port}"
    proc = start_tool("produce", name, "--url", url, "--count", "10000000", "--size", "100")
    wait_for(lambda: queue_row(dovecote, name)["size"] >= 50, "messages on the queue")
    out, err = interrupt(proc)
    assert err.strip() == ""
    (summary,) = out.splitlines()
    assert summary.startswith("Produced: ") and summary.endswith(", interrupted")
    sent = int(summary.split()[1])
    assert sent == queue_row(dovecote, name)["size"]  # persistent sends: all stored


def test_ctrl_c_ends_consume_and_purge_with_what_was_received(dovecote: BrokerProcess) -> None:
    name = f"ctrlc.consume.{uuid.uuid4().hex[:8]}"
    url = f"tcp://127.0.0.1:{dovecote.openwire_port}"
    tool("produce", name, "--url", url, "--count", "7", "--size", "10")
    proc = start_tool("consume", name, "--url", url, "--count", "100", "--timeout", "600")
    wait_for(lambda: queue_row(dovecote, name)["size"] == 0, "the 7 messages consumed")
    started = time.monotonic()
    out, _ = interrupt(proc)
    assert time.monotonic() - started < 5
    assert out.splitlines()[0].startswith("Consumed: 7 messages")
    assert out.strip().endswith(", interrupted")


def test_ctrl_c_ends_dstat_waiting_for_its_second_sample() -> None:
    """An admin API that lists no destination and says when it was asked: once asked,
    dstat waits its interval for the second sample, and Ctrl-C shows the first."""
    asked = threading.Event()

    class Api(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"[]"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            asked.set()

        def log_message(self, *args: object) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api) as api:
        threading.Thread(target=api.serve_forever, daemon=True).start()
        admin = f"http://127.0.0.1:{api.server_address[1]}"
        proc = start_tool("dstat", "--admin", admin, "--interval", "600")
        assert asked.wait(30), "dstat never asked the admin API"
        out, _ = interrupt(proc)
        api.shutdown()
    header, summary = out.strip().splitlines()
    assert header.split()[:3] == ["Name", "Queue", "Size"] and "Enqueue/s" not in header
    assert summary.startswith("dstat: 0 destinations") and summary.endswith(", interrupted")


def _blocked_signals(pid: int, tid: int) -> int:
    """A thread's blocked-signal mask (bit n-1: signal n)."""
    status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("SigBlk:"))[7:], 16)


def test_ctrl_c_while_connecting_is_one_line() -> None:
    """A broker that accepts and never answers: the tool waits for its WireFormatInfo. The
    client's own threads (the reader) block Ctrl-C and the like, so that the kernel gives the
    signal to the main thread, the one Python handles it in: landing on the reader, it
    waited for the main thread's 15 s negotiation wait to end."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        proc = start_tool("consume", "q", "--url", url)
        silent.settimeout(30)
        peer, _ = silent.accept()
        with peer:

            def others() -> list[int]:
                tasks = (int(t.name) for t in Path(f"/proc/{proc.pid}/task").iterdir())
                return [tid for tid in tasks if tid != proc.pid]

            wait_for(others, "the client's reader thread")
            for tid in others():
                blocked = _blocked_signals(proc.pid, tid)
                assert all(blocked >> (s - 1) & 1 for s in (signal.SIGINT, signal.SIGTERM)), tid
            # (the main thread blocks them too, but only while it starts a thread)
            wait_for(
                lambda: not _blocked_signals(proc.pid, proc.pid) >> (signal.SIGINT - 1) & 1,
                "the main thread taking Ctrl-C",
            )
            _, err = interrupt(proc)
    assert err.splitlines() == ["dovecote consume: interrupted"]
