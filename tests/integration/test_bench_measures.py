"""The benchmark's own measuring pieces (bench/runtimes.py and the harness's child-CPU and
bound figures), on real processes: a figure in bench/RESULTS.md is only as good as these."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import disk
import harness
import owload
import runtimes
from table import Row

from activemq import running_activemq
from brokers import running_broker

MIB = 1024


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_idle_rss_is_read_from_the_idle_process_itself() -> None:
    small = runtimes.idle_rss_kib(python("import time; print('ready', flush=True); time.sleep(60)"))
    # 64 MiB written (so resident) before the ready line: the figure must carry them.
    large = runtimes.idle_rss_kib(
        python("b = bytearray(64 << 20); print('ready', flush=True); import time; time.sleep(60)")
    )
    assert small > 2 * MIB
    assert large - small >= 60 * MIB


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("print('starting', flush=True)", "did not get ready"),
        ("import sys; sys.exit(0)", "did not get ready"),
        ("print('ready', flush=True)", "exited with 0 while idle"),
    ],
)
def test_a_runtime_that_does_not_idle_is_an_error(code: str, problem: str) -> None:
    with pytest.raises(RuntimeError, match=problem):
        runtimes.idle_rss_kib(python(code))


def test_the_runtimes_alone() -> None:
    """The Python floor carries asyncio's ssl and uvloop; the JVM one is a running JVM."""
    bare = runtimes.idle_rss_kib(python("import time; print('ready', flush=True); time.sleep(60)"))
    python_loop = runtimes.python_idle_rss_kib()
    jvm = runtimes.jvm_idle_rss_kib()
    assert python_loop - bare >= 5 * MIB
    assert jvm > python_loop


def test_waited_cpu_counts_every_thread_and_keeps_the_exit_code() -> None:
    burn = (
        "import threading, time\n"
        "def spin():\n"
        "    end = time.process_time() + 0.3\n"
        "    while time.process_time() < end: pass\n"
        "t = threading.Thread(target=spin); t.start(); t.join()\n"
        "raise SystemExit(3)\n"
    )
    proc = subprocess.Popen(python(burn))
    cpu = harness.waited_cpu_s(proc, 60)
    assert cpu >= 0.3
    assert proc.returncode == 3


def test_waited_cpu_kills_a_child_past_its_time() -> None:
    proc = subprocess.Popen(python("import time; time.sleep(60)"))
    harness.waited_cpu_s(proc, 0.2)
    assert proc.returncode == -9


@pytest.mark.parametrize(
    ("load_cpu", "seconds", "activemq_rate", "bound"),
    [
        (4.0, 3.0, 10_000.0, "at most 1.00x"),  # 20k messages in at least 2 s: 10k/s
        (2.0, 3.0, 10_000.0, "at most 2.00x"),
        (8.0, 5.0, 2_500.0, "at most 2.00x"),
    ],
)
def test_the_bound_the_load_leaves(
    load_cpu: float,
    seconds: float,
    activemq_rate: float,
    bound: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(harness.os, "cpu_count", lambda: 2)
    dovecote = harness.Measure(20_000, seconds, client_cpu_s=load_cpu)
    activemq = harness.Measure(20_000, 20_000 / activemq_rate, client_cpu_s=5.0)
    note = harness.client_bound("OpenWire", dovecote, activemq)
    assert bound in note
    assert f"at least {load_cpu / 2:.2f} s of the 2 cores" in note


def test_written_bytes_are_the_process_own_writes(tmp_path: Path) -> None:
    target = tmp_path / "out"
    code = (
        "import os, sys; sys.stdin.readline();"
        f" fd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT);"
        " [os.write(fd, os.urandom(1 << 20)) for _ in range(8)]; os.fsync(fd);"
        " print('done', flush=True); sys.stdin.readline()"
    )
    child = subprocess.Popen(python(code), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        before = disk.written_bytes(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"
        assert disk.written_bytes(child.pid) - before >= 8 << 20
        assert before < 1 << 20  # nothing before it wrote
    finally:
        child.kill()
        child.wait()


def test_the_disk_probe_writes_synced_and_leaves_nothing(tmp_path: Path) -> None:
    rate = disk.synced_write_mb_s(tmp_path, total=8 << 20)
    assert rate > 0
    assert list(tmp_path.iterdir()) == []


def test_the_disk_note() -> None:
    note = disk.disk_note(
        "100 KiB", (1000, 1000), (100 << 20, 200 << 20), (1.0, 4.0), probe_mb_s=102.4
    )
    assert "dovecote wrote 102.4 KiB per message to disk at 105 MB/s" in note
    assert "ActiveMQ 204.8 KiB at 52 MB/s" in note
    # the bound from the broker that writes least per message: 102.4e6 B/s / 104,858 B
    assert "at most 977 msg/s" in note


def _broker(kind: str, pid: int) -> harness.Broker:
    return harness.Broker(kind, pid, 0, 0, 0.0)


def test_runs_alternate_between_the_brokers_each_after_a_quiet_wait() -> None:
    """A B, B A, A B: a drift of the machine during a workload falls on both brokers."""
    events: list[str] = []
    brokers = {k: _broker(k, os.getpid()) for k in ("dovecote", "activemq")}

    def workload(b: harness.Broker, s: harness.Sizes) -> harness.Measure:
        events.append(f"{b.kind}{'-warm' if s is harness.SHORT else ''}")
        return harness.Measure(len([e for e in events if e != "quiet"]), 1.0)

    def quiet(waited_for: Iterable[harness.Broker]) -> None:
        assert {b.kind for b in waited_for} == set(brokers)  # both, not just the next one
        events.append("quiet")

    workloads = [harness.Workload("one", workload), harness.Workload("two", workload)]
    runs = harness.side_by_side(brokers, workloads, harness.FULL, 3, quiet)
    order = [e for e in events if e != "quiet"]
    each = ["dovecote-warm", "activemq-warm"]  # not measured
    each += ["dovecote", "activemq", "activemq", "dovecote", "dovecote", "activemq"]
    assert order == each * 2
    assert events[::2] == ["quiet"] * 16  # a wait before every run
    assert [m.messages for m in runs["one"]["dovecote"]] == [3, 6, 7]
    assert [m.messages for m in runs["two"]["activemq"]] == [12, 13, 16]
    assert harness.median_run(runs["one"]["dovecote"]).messages == 6


def test_the_quiet_wait_outlasts_a_busy_broker(tmp_path: Path) -> None:
    """It returns once the process stops using CPU, not before, and gives up on one that
    never does."""
    busy_s = 1.5
    code = (
        "import time\n"
        f"end = time.monotonic() + {busy_s}\n"
        "while time.monotonic() < end: pass\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(python(code))
    try:
        started = time.monotonic()
        harness.wait_quiet([_broker("activemq", child.pid)], window_s=0.2)
        assert time.monotonic() - started >= busy_s - 0.2
    finally:
        child.kill()
        child.wait()
    spinning = subprocess.Popen(python("while True: pass"))
    try:
        started = time.monotonic()
        harness.wait_quiet([_broker("activemq", spinning.pid)], window_s=0.2, timeout_s=1.0)
        assert 1.0 <= time.monotonic() - started < 5.0
    finally:
        spinning.kill()
        spinning.wait()


@pytest.mark.parametrize(
    ("row", "shown"),
    [
        (Row("a: msg/s", 1200.0, 1000.0, True, ",.0f", [0.9, 1.5, 1.2]), "1.20x (0.90-1.50)"),
        (Row("a: msg/s", 1200.0, 1000.0, True, ",.0f", [1.2]), "1.20x"),
        (Row("a: msg/s", 1200.0, 1000.0, True, ",.0f"), "1.20x"),
        (Row("a: p99 latency ms", 2.0, 3.0, False, ".2f"), "1.50x"),
        (Row("a: msg/s", None, 1000.0, True, ",.0f", [1.0, 2.0]), "-"),
    ],
)
def test_the_ratio_cell(row: Row, shown: str) -> None:
    assert row.cells()[-1] == shown


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_the_raw_openwire_load_runs_through_either_broker(kind: str, tmp_path: Path) -> None:
    """bench/owload.py against a real broker of each kind: every message arrives, several
    prefetch windows' worth (so its acks must free the window), and each read gives a
    latency."""
    count = 4 * owload.PREFETCH + 123
    starter = threading.Barrier(1)
    ready = threading.Event()
    result: dict[str, tuple[int, float, list[int]]] = {}
    with (
        running_broker(workdir=tmp_path)
        if kind == "dovecote"
        else running_activemq(tmp_path) as broker
    ):
        port = broker.openwire_port
        consumer = threading.Thread(
            target=lambda: result.setdefault("got", owload.consume(port, "raw", count, ready))
        )
        consumer.start()
        assert ready.wait(60)
        owload.produce(port, "raw", count, 1024, starter)
        consumer.join(120)
    received, _, latencies = result["got"]
    assert received == count
    assert latencies and all(0 <= x < 60e9 for x in latencies)
