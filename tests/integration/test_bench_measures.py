"""The benchmark's own measuring pieces (bench/runtimes.py and the harness's child-CPU and
bound figures, the disk probes, the table with its peers, the RabbitMQ peer, the network
pairs and the stream backlog's batches), on real processes: a figure in bench/RESULTS.md is
only as good as these. The RabbitMQ tests need Debian's rabbitmq-server (installed by
``make test``) and skip without it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bounds
import disk
import harness
import loadgen
import owload
import rabbitmq
import runtimes
import targets
import workloads
from table import Row, markdown

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
    cpu = workloads.waited_cpu_s(proc, 60)
    assert cpu >= 0.3
    assert proc.returncode == 3


def test_waited_cpu_kills_a_child_past_its_time() -> None:
    proc = subprocess.Popen(python("import time; time.sleep(60)"))
    workloads.waited_cpu_s(proc, 0.2)
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
        "100 KiB",
        {
            "dovecote": (1000, 100 << 20, 1.0),
            "activemq": (1000, 200 << 20, 4.0),
            "rabbitmq": (1000, 300 << 20, 2.0),
        },
        {"dovecote": "dovecote", "activemq": "ActiveMQ", "rabbitmq": "RabbitMQ"},
        probe_mb_s=102.4,
    )
    assert "dovecote 102.4 KiB at 105 MB/s, ActiveMQ 204.8 KiB at 52 MB/s" in note
    assert "RabbitMQ 307.2 KiB at 157 MB/s" in note
    # the bound from the broker that writes least per message: 102.4e6 B/s / 104,858 B
    assert "at most 977 msg/s" in note


def test_a_peer_that_did_not_store_persistent_messages_is_said_so() -> None:
    titles = {"dovecote": "dovecote", "activemq": "ActiveMQ", "rabbitmq": "RabbitMQ"}
    note = disk.unstored_note(
        "sync", {"dovecote": 1500.0, "activemq": 2000.0, "rabbitmq": 8.0}, titles
    )
    assert note is not None
    assert "dovecote 1,500 B, ActiveMQ 2,000 B, RabbitMQ 8 B. RabbitMQ did not store" in note
    assert disk.unstored_note("sync", {"dovecote": 1500.0, "rabbitmq": 5700.0}, titles) is None
    # a row of non-persistent messages: dovecote writes nothing, nobody is held to it
    assert disk.unstored_note("np", {"dovecote": 0.0, "rabbitmq": 0.0}, titles) is None


def test_the_synced_append_probe_counts_fsynced_appends(tmp_path: Path) -> None:
    """Each append is a write and an fsync of its own: the rate is far below what the same
    bytes take unsynced, and the file is gone afterwards."""
    rate = disk.synced_appends_per_s(tmp_path, seconds=0.5)
    assert 10 < rate < 1_000_000
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("appends", "target", "verdict"),
    [(3_500.0, 2_450.0, "9% short"), (5_000.0, 2_500.0, "11% short"), (3_000.0, 2_100.0, "met")],
)
def test_the_lone_sync_producer_target(appends: float, target: float, verdict: str) -> None:
    """min(2,500 msg/s, 70% of the disk's synced appends), shown with dovecote's rate."""
    assert targets.sync_send_target(appends) == pytest.approx(target)
    rate = 2_225.0
    row = targets.sync_send_row("sync 1", rate, target, appends)
    assert row.values == {"dovecote": pytest.approx(target)}
    assert row.cells(("activemq", "rabbitmq"), [])[-1].endswith(verdict)
    assert verdict in targets.sync_send_note("sync 1", rate, target, appends)


def test_the_idle_target_is_a_quarter_of_the_smallest_peer() -> None:
    idle = {"dovecote": 35.6, "activemq": 99.2, "rabbitmq": 140.0}
    note = targets.idle_note(idle, {"dovecote": 21.5, "activemq": 36.5, "rabbitmq": 37.4})
    assert "(ActiveMQ 5.17's 99.2 MiB), 24.8 MiB; dovecote's is 35.6: not met, 10.8" in note
    assert "bound: the runtime and the libraries" in note
    assert "would close it: nothing dovecote can do on CPython" in note
    assert "the Erlang VM alone 37.4 of RabbitMQ 3.10's 140.0" in note
    assert ": met" in targets.idle_note({"dovecote": 20.0, "activemq": 99.2}, {})


def test_rows_under_the_ratio_to_the_best_peer_are_named() -> None:
    rows = [
        Row("fast: msg/s", {"dovecote": 300.0, "activemq": 100.0, "rabbitmq": 150.0}, True, ",.0f"),
        Row("slow: msg/s", {"dovecote": 130.0, "activemq": 100.0, "rabbitmq": 120.0}, True, ",.0f"),
        Row("slow: p99 latency ms", {"dovecote": 9.0, "activemq": 1.0}, False, ".2f"),
    ]
    assert targets.below_best(rows) == [
        "under the issue's 1.5x against the best peer: slow 1.08x (RabbitMQ 3.10), 1.38x short"
        " of 1.5x; bound: not yet known (no measurement explains this row)"
    ]


SYNC_ROW = "persistent sync send, 1 producer"


def _sync_row(rabbitmq: float) -> Row:
    return Row(
        f"{SYNC_ROW}: msg/s", {"dovecote": 600.0, "activemq": 800.0, "rabbitmq": rabbitmq},
        True, ",.0f",
    )  # fmt: skip


def test_a_row_short_of_the_ratio_says_what_bounds_it_from_what_the_run_showed() -> None:
    """RabbitMQ's lead is put down to its unstored confirms only when the run's bytes written
    per message show it; otherwise the bound against the best peer that applies is said."""
    unstored = {SYNC_ROW: bounds.RunFacts({"dovecote": 5400.0, "activemq": 5800.0, "rabbitmq": 4})}
    [note] = targets.below_best([_sync_row(5000.0)], unstored)
    assert "0.12x (RabbitMQ 3.10), 12.50x short of 1.5x; bound: RabbitMQ 3.10 answers" in note
    assert "would close it: only answering before the fsync" in note
    stored = {SYNC_ROW: bounds.RunFacts({"dovecote": 5400.0, "rabbitmq": 5000.0})}
    [note] = targets.below_best([_sync_row(5000.0)], stored)
    assert "bound: not yet known" in note  # no known bound against RabbitMQ storing alike
    [note] = targets.below_best([_sync_row(0.0)], unstored)  # ActiveMQ the best peer
    assert "(ActiveMQ 5.17)" in note and "bound: each receipt waits for one fsync" in note


def test_the_java_tools_bound_applies_when_their_cpu_caps_the_ratio() -> None:
    name = "OpenWire, ActiveMQ's tools"
    row = Row(f"{name}: msg/s", {"dovecote": 900.0, "activemq": 1000.0}, True, ",.0f")
    [capped] = targets.below_best([row], {name: bounds.RunFacts({}, 1.2)})
    assert "broker costing nothing at most the ceiling" in capped
    [not_capped] = targets.below_best([row], {name: bounds.RunFacts({}, 2.4)})
    assert "the two JVMs of ActiveMQ's tools more than the broker" in not_capped


def test_a_row_met_on_a_quiet_machine_points_at_the_load() -> None:
    row = Row("persistent async send: msg/s", {"dovecote": 10.0, "activemq": 9.0}, True, ",.0f")
    [note] = targets.below_best([row])
    assert "on a quiet machine this row was at 2.87x" in note
    assert all(b.bound and b.closes for known in bounds.KNOWN.values() for b in known)
    names = {w.name for w in workloads.WORKLOADS}
    assert set(bounds.KNOWN) | set(bounds.QUIET) <= names  # no bound for a row that is gone


def test_the_harness_collects_what_bounds_each_row(tmp_path: Path) -> None:
    """workload_rows hands the run's bytes per message and the Java tools' ceiling on."""
    d = harness.Measure(messages=1000, seconds=1.0, disk_bytes=5_400_000, client_cpu_s=4.0)
    a = harness.Measure(messages=1000, seconds=1.0, disk_bytes=5_800_000, client_cpu_s=3.0)
    w = harness.Workload(SYNC_ROW, lambda b, s: d)
    measured = harness.Run(
        ("dovecote", "activemq"), {}, {SYNC_ROW: {"dovecote": [d], "activemq": [a]}}
    )
    facts: dict[str, bounds.RunFacts] = {}
    harness.workload_rows(w, measured, [], facts)
    assert facts[SYNC_ROW].bytes_per_message == {"dovecote": 5400.0, "activemq": 5800.0}
    cores = os.cpu_count() or 1
    assert facts[SYNC_ROW].client_ceiling == pytest.approx(1000 / (4.0 / cores) / 1000)


def _broker(kind: str, pid: int) -> harness.Broker:
    return harness.Broker(kind, pid, 0, 0, 0.0)


def test_a_peer_that_cannot_run_a_workload_sits_it_out() -> None:
    """Three brokers in turns (A B C, C B A); RabbitMQ skips the OpenWire-like workload."""
    events: list[str] = []
    brokers = {k: _broker(k, os.getpid()) for k in ("dovecote", "activemq", "rabbitmq")}

    def workload(b: harness.Broker, s: harness.Sizes) -> harness.Measure:
        events.append(b.kind)
        return harness.Measure(1, 1.0)

    both = harness.Workload("both", workload)
    not_rabbit = harness.Workload("ow", workload, missing={"rabbitmq": "no OpenWire"})
    runs = harness.side_by_side(brokers, [both, not_rabbit], harness.FULL, 2, lambda _: None, None)
    three = ["dovecote", "activemq", "rabbitmq", "rabbitmq", "activemq", "dovecote"]
    assert events == [*three, "dovecote", "activemq", "activemq", "dovecote"]
    assert set(runs["ow"]) == {"dovecote", "activemq"}


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

    both = [harness.Workload("one", workload), harness.Workload("two", workload)]
    runs = harness.side_by_side(brokers, both, harness.FULL, 3, quiet)
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
    # Busy for that much CPU (not wall) time, from its line on: on a loaded machine it
    # takes longer, never less.
    code = (
        "import time\n"
        "print('busy', flush=True)\n"
        f"while time.process_time() < {busy_s}: pass\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen(python(code), stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "busy\n"
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


PEERS = ("activemq", "rabbitmq")


@pytest.mark.parametrize(
    ("row", "ratios"),
    [
        (
            Row("a: msg/s", {"dovecote": 1200.0, "activemq": 1000.0, "rabbitmq": 800.0}, True,
                ",.0f", {"activemq": [0.9, 1.5, 1.2], "rabbitmq": [1.5, 1.4, 1.6]}),
            ["1.20x (0.90-1.50)", "1.50x (1.40-1.60)", "1.20x (ActiveMQ)"],
        ),
        (
            Row("a: msg/s", {"dovecote": 1200.0, "activemq": 1000.0, "rabbitmq": 2400.0}, True,
                ",.0f", {"activemq": [1.2]}),
            ["1.20x", "0.50x", "0.50x (RabbitMQ)"],
        ),
        (
            Row("a: p99 latency ms", {"dovecote": 2.0, "activemq": 3.0, "rabbitmq": 2.5}, False,
                ".2f"),
            ["1.50x", "1.25x", "1.25x (RabbitMQ)"],
        ),
        (
            Row("a: msg/s", {"activemq": 1000.0}, True, ",.0f", {"activemq": [1.0, 2.0]},
                {"rabbitmq": "no OpenWire"}),
            ["-", "-", "-"],
        ),
    ],
)  # fmt: skip
def test_the_ratio_cells(row: Row, ratios: list[str]) -> None:
    """Against each peer, then against the best peer on the row (named)."""
    assert row.cells(PEERS, [])[-3:] == ratios


def test_a_figure_a_peer_cannot_give_is_na_with_its_reason_once() -> None:
    why = "RabbitMQ speaks no OpenWire"
    rows = [
        Row("ow: msg/s", {"dovecote": 2.0, "activemq": 1.0}, True, ",.0f",
            missing={"rabbitmq": why}),
        Row("ow: p99 latency ms", {"dovecote": 1.0, "activemq": 2.0}, False, ".2f",
            missing={"rabbitmq": why}),
        Row("net: msg/s", {"dovecote": 2.0, "activemq": 1.0}, True, ",.0f",
            missing={"rabbitmq": "no connectors"}),
    ]  # fmt: skip
    text = markdown(rows, [], "cmd", PEERS)
    assert "| ow: msg/s | 2 | 1 | n/a [1] | 2.00x | - | 2.00x (ActiveMQ) |" in text
    assert "| net: msg/s | 2 | 1 | n/a [2] |" in text
    assert text.count(why) == 1
    assert "- [1] RabbitMQ speaks no OpenWire\n- [2] no connectors" in text
    assert "| Workload and figure | dovecote | ActiveMQ 5.17 | RabbitMQ 3.10 |" in text


@pytest.mark.parametrize(
    ("peer", "destination", "durable", "headers"),
    [
        ("rabbitmq", "/queue/q", True, "durable:true\nauto-delete:false\nexclusive:false\n"),
        ("rabbitmq", "/queue/q", False, "durable:false\nauto-delete:false\nexclusive:false\n"),
        ("rabbitmq", "/topic/t", True, ""),
        ("activemq", "/queue/q", True, ""),
        ("dovecote", "/queue/q", True, ""),
    ],
)
def test_the_peer_specific_headers(
    peer: str, destination: str, durable: bool, headers: str
) -> None:
    assert loadgen.declaration(peer, destination, durable) == headers
    assert loadgen.virtual_host(peer) == ("/" if peer == "rabbitmq" else "localhost")


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


TINY = harness.Sizes(400, 400, 50, 400, 400, 100, 10, 400, 400, 200)
needs_rabbitmq = pytest.mark.skipif(
    rabbitmq.missing_reason() is not None, reason=str(rabbitmq.missing_reason())
)


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


@pytest.fixture
def rabbit_dir() -> Iterator[Path]:
    """A directory the rabbitmq user can reach (pytest's tmp_path is under a root-only
    directory): in the system's temporary directory, as the harness's."""
    with tempfile.TemporaryDirectory(prefix="bench-rabbitmq-test-") as tmp:
        yield Path(tmp)


@needs_rabbitmq
def test_rabbitmq_runs_the_stomp_workloads_and_is_stopped_whatever_happens(
    rabbit_dir: Path,
) -> None:
    """The harness's RabbitMQ peer on its own directory: four senders declaring one new
    queue at once (which collide without the declaration headers), sync sends with
    receipts, a persistent backlog, topic fan-out, transactions; every message arrives and
    the Erlang VM's CPU is read. It is stopped on the way out, also when the run fails; a
    start on the same directory recovers the persistent messages (the restart row). With
    nobody consuming, its sync sends are stored."""
    by_name = {w.name: w for w in harness.WORKLOADS}
    chosen = [
        by_name[n]
        for n in (
            "non-persistent queue 4→4",
            "persistent sync send, 1 producer",
            "persistent sync send, 1 producer, nobody consuming",
            "backlog drained (persistent)",
            "topic fan-out 1→8 (deliveries)",
            "transacted batches of 100",
        )
    ]
    with (
        pytest.raises(RuntimeError, match="the run failed"),
        harness.started("rabbitmq", rabbit_dir) as broker,
    ):
        vm = broker.pid
        assert Path(f"/proc/{vm}/cmdline").read_bytes().split(b"\0")[0].endswith(b"beam.smp")
        runs = harness.side_by_side({"rabbitmq": broker}, chosen, TINY, 1, warm_up=None)
        for name, by_kind in runs.items():
            (m,) = by_kind["rabbitmq"]
            assert m.note == "", name
            assert m.messages >= 50 and m.rate > 0 and m.cpu_s >= 0, name
        # The VM's CPU is counted in clock ticks (10 ms): one tiny row may take less than a
        # tick, the six together do not.
        assert sum(by_kind["rabbitmq"][0].cpu_s for by_kind in runs.values()) > 0
        (alone,) = runs["persistent sync send, 1 producer, nobody consuming"]["rabbitmq"]
        assert alone.disk_bytes >= alone.messages * 1024  # stored, each one
        workloads.fill(broker, "/queue/kept", 30)
        raise RuntimeError("the run failed")
    assert _gone(vm)
    with harness.started("rabbitmq", rabbit_dir) as again:
        loadgen.first_message(again.stomp_port, "/queue/kept", timeout_s=60, peer="rabbitmq")
        vm = again.pid
    assert _gone(vm)


@needs_rabbitmq
def test_a_rabbitmq_queue_declared_durable_refuses_a_subscription_saying_otherwise(
    rabbit_dir: Path,
) -> None:
    """Why every frame carries the same declaration: RabbitMQ holds a queue to the headers
    of the first frame that named it (reference: rabbitmq-here.md)."""
    with rabbitmq.running_rabbitmq(rabbit_dir) as node:
        workloads.fill(harness.Broker("rabbitmq", node.pid, node.stomp_port, 0, 0.0), "/queue/d", 3)
        with pytest.raises(ConnectionError, match="inequivalent arg 'durable'"):
            loadgen.consume(node.stomp_port, ["/queue/d"], 3, threading.Event(), peer="rabbitmq")
        got = loadgen.consume(
            node.stomp_port, ["/queue/d"], 3, threading.Event(), peer="rabbitmq", durable=True
        )
        assert got.received == 3


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_the_forwarding_row_runs_on_a_bridged_pair(kind: str, tmp_path: Path) -> None:
    """A backlog sent to A arrives whole on B through the bridge; the pair's CPU is both
    brokers' (B's alone would be less)."""
    with harness.started_pair(kind, tmp_path) as pair:
        assert len(pair.pids) == 2 and pair.forward_stomp_port != pair.stomp_port
        b_only = harness.Broker(kind, pair.other_pids[0], 0, 0, 0.0)
        b_before = b_only.cpu_s()
        m = workloads.forward_persistent(pair, TINY)
        b_cpu = b_only.cpu_s() - b_before
    assert m.messages == TINY.forward_messages and m.note == ""
    assert 0 < m.seconds < 60
    # Both read in clock ticks (10 ms): 200 forwarded messages can cost B alone as many as
    # the pair, and the pair compiled less than one tick.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert m.cpu_s >= 0 and m.cpu_s >= b_cpu - tick


def test_the_stream_backlog_bench_measures_each_step_of_its_batches() -> None:
    bench = Path(__file__).resolve().parents[2] / "bench" / "stream_backlog.py"
    args = ["--messages", "6000", "--per-batch", "1000", "--batches", "3", "--body", "64"]
    out = subprocess.run([sys.executable, str(bench), *args], capture_output=True, text=True,
                         timeout=120, check=True).stdout  # fmt: skip
    row = [line for line in out.splitlines() if line.startswith("| installed |")]
    assert len(row) == 1, out
    plan, read, commit, batch = (float(cell) for cell in row[0].strip("| ").split(" | ")[1:])
    assert min(plan, read, commit) > 0 and batch == pytest.approx(plan + read + commit, abs=0.2)
