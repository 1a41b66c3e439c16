"""dovecote and ActiveMQ 5.17 side by side: the same workloads against each in one run, one
Markdown table with the ratio dovecote/ActiveMQ on every row (issue 7).

    .venv/bin/python bench/harness.py [--full] [--repeat N] [--out FILE] [--only NAME ...]
                                      [--secured]

``make bench`` runs the short form three times over (a few minutes; each figure is from the
median run); ``--full`` uses the issue's sizes (a 100k backlog, 1M messages for recovery).
Both brokers run on loopback, at the same time, with equivalent stores: dovecote's journal
and ActiveMQ's KahaDB, both syncing to disk before confirming a persistent send. Each
workload's runs alternate between them (dovecote then ActiveMQ, then the other way round),
each once both are quiet, so that the machine's drift over minutes falls on both alike.
The load comes from bench/loadgen.py (separate processes, raw pipelined STOMP), for one
OpenWire row from ActiveMQ's own producer and consumer tools (a JVM each, for both brokers)
and for the other from bench/owload.py (raw pipelined OpenWire, a process each).

``--secured`` runs both brokers with authentication and authorization on, configured alike
(tests/securitykit.py: users, groups and an authorization map; the load logs in as a user
with every right), for the STOMP workloads, into bench/RESULTS-secured.md: beside
RESULTS.md it shows what security costs each broker.

For every ratio, higher is better for dovecote: throughput ratios are dovecote/ActiveMQ,
latency, CPU, memory and time ratios are ActiveMQ/dovecote. The broker's CPU seconds and RSS
come from /proc for the broker process itself (the JVM for ActiveMQ).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the test fixtures that start both brokers
sys.path.insert(0, str(ROOT / "bench"))

import disk  # noqa: E402
import loadgen  # noqa: E402
import owload  # noqa: E402
import runtimes  # noqa: E402
from table import Row, markdown  # noqa: E402

from activemq import HOME as AMQ_HOME  # noqa: E402
from activemq import accepts, running_activemq  # noqa: E402
from brokers import running_broker  # noqa: E402
from securitykit import USERS, activemq_plugins, dovecote_toml  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TOOLS_LOG4J = ROOT / "bench" / "log4j.properties"
"""ActiveMQ's command-line tools print nothing without a log4j appender; warnings only."""

DOVECOTE_CONFIG = """
[broker]
name = "bench"
[store]
kind = "journal"
enable_journal_disk_syncs = true
"""
SECURED = False
"""Both brokers with authentication and authorization (--secured)."""


# -- the broker under test -------------------------------------------------------------------


@dataclass
class Broker:
    kind: str
    pid: int
    stomp_port: int
    openwire_port: int
    start_s: float
    idle_rss_kib: int = 0

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def status(self, key: str) -> int:
        return runtimes.status_kib(self.pid, key) or 0

    def rss_kib(self) -> int:
        return self.status("VmRSS")


@contextmanager
def started(kind: str, workdir: Path, openwire_port: int = 0) -> Iterator[Broker]:
    """Start one broker on its store under ``workdir``; the start time runs from spawn to
    the OpenWire port accepting."""
    t0 = time.monotonic()
    if kind == "dovecote":
        config = DOVECOTE_CONFIG + (dovecote_toml(allow_anonymous=False) if SECURED else "")
        with running_broker(config, workdir, openwire_port) as proc:
            while not accepts(proc.openwire_port):
                time.sleep(0.01)
            broker = Broker(
                kind, proc.process.pid, proc.stomp_port, proc.openwire_port, time.monotonic() - t0
            )
            yield _settle(broker)
    else:
        plugins = activemq_plugins(allow_anonymous=False) if SECURED else ""
        with running_activemq(workdir, openwire_port, plugins=plugins) as amq:
            broker = Broker(
                kind, amq.process.pid, amq.stomp_port, amq.openwire_port, time.monotonic() - t0
            )
            yield _settle(broker)


def _settle(broker: Broker) -> Broker:
    """Idle RSS: after start-up has finished allocating (a JVM keeps going for a moment)."""
    time.sleep(1.0)
    broker.idle_rss_kib = broker.rss_kib()
    return broker


# -- workloads --------------------------------------------------------------------------------


@dataclass
class Measure:
    messages: int = 0
    seconds: float = 0.0
    latencies_ns: list[int] = field(default_factory=list)
    cpu_s: float = 0.0
    peak_rss_kib: int = 0
    note: str = ""
    client_cpu_s: float | None = None
    """CPU of the load's own processes, where the harness can read it (the Java tools)."""
    disk_bytes: int = 0
    """What the broker wrote to disk meanwhile (all its threads)."""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, q: float) -> float | None:
        if not self.latencies_ns:
            return None
        ordered = sorted(self.latencies_ns)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6


@dataclass
class Workload:
    name: str
    run: Callable[[Broker, Sizes], Measure]
    disk_heavy: bool = False
    """Its table shows what was written to disk, against what the disk takes alone."""


@dataclass
class Sizes:
    np_messages: int
    backlog: int
    sync_messages: int
    async_messages: int
    tx_messages: int
    fanout_messages: int
    large_messages: int
    openwire_messages: int
    recovery_messages: int


SHORT = Sizes(20_000, 20_000, 2_000, 10_000, 10_000, 5_000, 500, 20_000, 20_000)
FULL = Sizes(100_000, 100_000, 10_000, 50_000, 50_000, 20_000, 2_000, 100_000, 1_000_000)

_pool: ProcessPoolExecutor | None = None


def pool() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(max_workers=16, mp_context=mp.get_context("fork"))
    return _pool


def _queue_name(tag: str) -> str:
    return f"bench.{tag}.{time.monotonic_ns()}"


def traffic(
    broker: Broker,
    destination: str,
    producers: int,
    consumers: int,
    per_producer: int,
    size: int = 1024,
    persistent: bool = False,
    sync: bool = False,
    tx_batch: int = 0,
    topic_fanout: bool = False,
) -> Measure:
    """Producers and consumers at once; throughput from the first send to the last receipt
    of the last consumer; latency from the consumers (or the receipts when sync)."""
    manager = mp.Manager()
    start = manager.Barrier(producers + 1)
    total = producers * per_producer
    # A topic's consumers each get every message; a queue's share them, however the broker
    # spreads them, and stop together once they have all of them.
    # (One consumer needs no shared counter: its lock is a round trip to the manager
    # process per read, which would compete with the broker for the CPU.)
    alone = topic_fanout or consumers == 1
    shared = None if alone else manager.Value("i", 0)
    lock = None if alone else manager.Lock()
    each = total
    readies = [manager.Event() for _ in range(consumers)]
    cons: list[Future[loadgen.ConsumerResult]] = [
        pool().submit(
            loadgen.consume,
            broker.stomp_port,
            [destination],
            each,
            ready,
            shared=shared,
            shared_lock=lock,
        )
        for ready in readies
    ]
    for ready in readies:
        ready.wait(60)
    prods = [
        pool().submit(
            loadgen.produce,
            broker.stomp_port,
            destination,
            per_producer,
            size,
            persistent,
            sync,
            tx_batch,
            start,
        )
        for _ in range(producers)
    ]
    cpu0 = broker.cpu_s()
    written0 = disk.written_bytes(broker.pid)
    start.wait()
    t0 = time.monotonic()
    p_results = [f.result(timeout=1800) for f in prods]
    c_results = [f.result(timeout=1800) for f in cons]
    received = sum(c.received for c in c_results)
    finished = max(c.finished for c in c_results)
    measure = Measure(
        messages=total,
        seconds=finished - t0,
        cpu_s=broker.cpu_s() - cpu0,
        peak_rss_kib=broker.status("VmHWM"),
        disk_bytes=disk.written_bytes(broker.pid) - written0,
    )
    expected = each * consumers if topic_fanout else total
    if received < expected:
        measure.note = f"only {received} of {expected} received"
    if sync or tx_batch:
        measure.latencies_ns = [x for p in p_results for x in p.latencies_ns]
    else:
        measure.latencies_ns = [x for c in c_results for x in c.latencies_ns]
    manager.shutdown()
    return measure


def np_1_1(b: Broker, s: Sizes) -> Measure:
    return traffic(b, f"/queue/{_queue_name('np11')}", 1, 1, s.np_messages)


def np_4_4(b: Broker, s: Sizes) -> Measure:
    return traffic(b, f"/queue/{_queue_name('np44')}", 4, 4, s.np_messages // 4)


def backlog_drain(b: Broker, s: Sizes) -> Measure:
    """Fill a queue first (persistent, async), then time only the drain."""
    name = f"/queue/{_queue_name('backlog')}"
    dummy = mp.Manager()
    barrier = dummy.Barrier(1)
    pool().submit(
        loadgen.produce, b.stomp_port, name, s.backlog, 1024, True, False, 0, barrier
    ).result(timeout=1800)
    dummy.shutdown()
    ready = mp.Manager().Event()
    cpu0 = b.cpu_s()
    t0 = time.monotonic()
    result = pool().submit(loadgen.consume, b.stomp_port, [name], s.backlog, ready).result(1800)
    m = Measure(
        result.received,
        result.finished - t0,
        result.latencies_ns[:0],
        b.cpu_s() - cpu0,
        b.status("VmHWM"),
    )
    if result.received < s.backlog:
        m.note = f"only {result.received} drained"
    return m


def sync_1(b: Broker, s: Sizes) -> Measure:
    return traffic(
        b, f"/queue/{_queue_name('sync1')}", 1, 1, s.sync_messages, persistent=True, sync=True
    )


def sync_8(b: Broker, s: Sizes) -> Measure:
    return traffic(
        b, f"/queue/{_queue_name('sync8')}", 8, 1, s.sync_messages // 8, persistent=True, sync=True
    )


def persistent_async(b: Broker, s: Sizes) -> Measure:
    return traffic(b, f"/queue/{_queue_name('async')}", 1, 1, s.async_messages, persistent=True)


def transacted_100(b: Broker, s: Sizes) -> Measure:
    return traffic(
        b, f"/queue/{_queue_name('tx')}", 1, 1, s.tx_messages, persistent=True, tx_batch=100
    )


def fanout_1_8(b: Broker, s: Sizes) -> Measure:
    m = traffic(b, f"/topic/{_queue_name('fan')}", 1, 8, s.fanout_messages, topic_fanout=True)
    m.messages *= 8  # deliveries
    return m


def large_100k(b: Broker, s: Sizes) -> Measure:
    return traffic(
        b,
        f"/queue/{_queue_name('large')}",
        1,
        1,
        s.large_messages,
        size=100 * 1024,
        persistent=True,
    )


def openwire_tools(b: Broker, s: Sizes) -> Measure:
    """ActiveMQ's producer and consumer tools (OpenWire, the Java client), non-persistent,
    started together; timed from spawn to the consumer's exit, JVM start included for both
    brokers alike."""
    name = f"queue://{_queue_name('ow')}"
    url = f"tcp://127.0.0.1:{b.openwire_port}"
    base = [
        "java",
        f"-Dlog4j.configuration=file:{TOOLS_LOG4J}",
        f"-Dactivemq.home={AMQ_HOME}",
        "-jar",
        str(AMQ_HOME / "bin" / "activemq.jar"),
    ]
    common = ["--brokerUrl", url, "--destination", name, "--messageCount", str(s.openwire_messages)]
    cpu0 = b.cpu_s()
    t0 = time.monotonic()
    consumer = subprocess.Popen(
        [*base, "consumer", *common], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    producer = subprocess.Popen(
        [*base, "producer", *common, "--messageSize", "1024", "--persistent", "false"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tools_cpu = waited_cpu_s(producer, 1800) + waited_cpu_s(consumer, 1800)
    m = Measure(
        s.openwire_messages,
        time.monotonic() - t0,
        cpu_s=b.cpu_s() - cpu0,
        peak_rss_kib=b.status("VmHWM"),
        client_cpu_s=tools_cpu,
    )
    if consumer.returncode or producer.returncode:
        m.note = f"tool exit codes {producer.returncode}/{consumer.returncode}"
    return m


def openwire_raw(b: Broker, s: Sizes) -> Measure:
    """Non-persistent 1→1 over OpenWire from bench/owload.py's raw pipelined producer and
    consumer (a process each): the brokers set the pace, not a client's CPU."""
    queue = _queue_name("owraw")
    manager = mp.Manager()
    ready = manager.Event()
    start = manager.Barrier(2)
    consumer = pool().submit(owload.consume, b.openwire_port, queue, s.np_messages, ready)
    ready.wait(60)
    producer = pool().submit(owload.produce, b.openwire_port, queue, s.np_messages, 1024, start)
    cpu0 = b.cpu_s()
    start.wait()
    t0 = time.monotonic()
    producer.result(1800)
    received, last, latencies = consumer.result(1800)
    m = Measure(received, last - t0, latencies, b.cpu_s() - cpu0, b.status("VmHWM"))
    if received < s.np_messages:
        m.note = f"only {received} of {s.np_messages} received"
    manager.shutdown()
    return m


def waited_cpu_s(proc: subprocess.Popen[bytes], timeout_s: float) -> float:
    """Wait for a child to exit (killed past the timeout) and return the CPU seconds it
    used, all its threads (os.wait4's resource usage; Popen.wait does not give it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
        time.sleep(0.02)


WORKLOADS = [
    Workload("non-persistent queue 1→1", np_1_1),
    Workload("non-persistent queue 4→4", np_4_4),
    Workload("backlog drained (persistent)", backlog_drain),
    Workload("persistent sync send, 1 producer", sync_1),
    Workload("persistent sync send, 8 producers", sync_8),
    Workload("persistent async send", persistent_async),
    Workload("transacted batches of 100", transacted_100),
    Workload("topic fan-out 1→8 (deliveries)", fanout_1_8),
    Workload("100 KiB persistent messages", large_100k, disk_heavy=True),
    Workload("OpenWire, ActiveMQ's tools", openwire_tools),
    Workload("OpenWire, raw pipelined load, non-persistent 1→1", openwire_raw),
]


def recovery(kind: str, s: Sizes, workdir: Path) -> tuple[float, float]:
    """(start time with an empty store, restart time with ``recovery_messages`` stored)."""
    with started(kind, workdir) as b:
        empty_start = b.start_s
        port = b.openwire_port
        barrier = mp.Manager().Barrier(1)
        pool().submit(
            loadgen.produce,
            b.stomp_port,
            "/queue/bench.recovery",
            s.recovery_messages,
            1024,
            True,
            False,
            0,
            barrier,
        ).result(3600)
    t0 = time.monotonic()
    with started(kind, workdir, port) as b:
        # Recovered means a consumer gets the first stored message. (A consumer that counts
        # until its subscription's receipt would take the whole backlog from a broker that
        # dispatches before it answers: client acks and a window of one.)
        loadgen.first_message(b.stomp_port, "/queue/bench.recovery")
        restart = time.monotonic() - t0 - 1.0  # _settle's pause is not recovery
    return empty_start, restart


# -- the run ----------------------------------------------------------------------------------


KINDS = ("dovecote", "activemq")


def wait_quiet(
    brokers: Iterable[Broker], window_s: float = 0.5, share: float = 0.05, timeout_s: float = 20.0
) -> None:
    """Poll until no broker uses more than ``share`` of a core over a window: a JVM collects
    garbage and KahaDB checkpoints its index a while after a run, and that work must not
    fall on the next run, whichever broker's it is."""
    deadline = time.monotonic() + timeout_s
    brokers = list(brokers)
    while time.monotonic() < deadline:
        before = [b.cpu_s() for b in brokers]
        time.sleep(window_s)
        if all(b.cpu_s() - c <= share * window_s for b, c in zip(brokers, before, strict=True)):
            return


def side_by_side(
    brokers: dict[str, Broker],
    workloads: list[Workload],
    sizes: Sizes,
    repeat: int,
    quiet: Callable[[Iterable[Broker]], None] = wait_quiet,
    warm_up: Sizes | None = SHORT,
) -> dict[str, dict[str, list[Measure]]]:
    """Every run of every workload, alternating between the brokers (A B, then B A, ...),
    both running throughout. This machine drifts over minutes (the shared disk's latency, a
    neighbour's load: a broker's rate moved by 2x between runs an hour apart); taken in
    turns, a drift falls on both brokers alike instead of on whichever ran then.

    Each workload first runs once on each broker at ``warm_up``'s sizes, not measured:
    ActiveMQ's JIT compiles a workload's paths during its first run (a cold non-persistent
    run made 19k msg/s, the next 39k), and a broker in service is warm."""
    runs: dict[str, dict[str, list[Measure]]] = {}
    kinds = list(brokers)
    for w in workloads:
        by_kind = runs.setdefault(w.name, {kind: [] for kind in kinds})
        if warm_up is not None:
            for kind in kinds:
                print(f"  {kind}: {w.name} (warm-up) ...", file=sys.stderr, flush=True)
                quiet(brokers.values())
                w.run(brokers[kind], warm_up)
        for i in range(repeat):
            for kind in kinds if i % 2 == 0 else kinds[::-1]:
                print(f"  {kind}: {w.name} ({i + 1}/{repeat}) ...", file=sys.stderr, flush=True)
                quiet(brokers.values())
                by_kind[kind].append(w.run(brokers[kind], sizes))
    return runs


def median_run(runs: list[Measure]) -> Measure:
    """The median run by throughput, whole (its latencies and CPU with it): one run's
    figures move by 20% or more on a shared 2-core machine."""
    return sorted(runs, key=lambda r: r.rate)[len(runs) // 2]


def run(sizes: Sizes, only: list[str], repeat: int = 1) -> tuple[list[Row], list[str]]:
    results: dict[str, dict[str, Measure]] = {}
    pair_ratios: dict[str, list[float]] = {}
    rows: list[Row] = []
    notes: list[str] = []
    starts: dict[str, tuple[float, float]] = {}
    idle: dict[str, int] = {}
    peak: dict[str, int] = {}
    runtime_idle: dict[str, int] = {}
    if not only or any("runtime" in o for o in only):
        print("  the runtimes alone ...", file=sys.stderr, flush=True)
        runtime_idle = {
            "dovecote": runtimes.python_idle_rss_kib(),
            "activemq": runtimes.jvm_idle_rss_kib(),
        }
    selected = [w for w in WORKLOADS if not only or any(o in w.name for o in only)]
    heavy = [w.name for w in selected if w.disk_heavy]
    probe_mb_s = disk.synced_write_mb_s(Path(tempfile.gettempdir())) if heavy else 0.0
    with ExitStack() as stack:
        brokers: dict[str, Broker] = {}
        for kind in KINDS:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"bench-{kind}-"))
            brokers[kind] = stack.enter_context(started(kind, Path(tmp)))
            idle[kind] = brokers[kind].idle_rss_kib
        for name, by_kind in side_by_side(brokers, selected, sizes, repeat).items():
            results[name] = {kind: median_run(runs) for kind, runs in by_kind.items()}
            pairs = zip(by_kind["dovecote"], by_kind["activemq"], strict=True)
            pair_ratios[name] = [d.rate / a.rate for d, a in pairs if a.rate]
            for kind, runs in by_kind.items():
                notes += [f"{kind}, {name}: {r.note}" for r in runs if r.note]
        peak = {kind: b.status("VmHWM") for kind, b in brokers.items()}
    for kind in KINDS:
        if not only or any("recovery" in o for o in only):
            with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-rec-") as tmp:
                print(f"  {kind}: start and recovery ...", file=sys.stderr, flush=True)
                starts[kind] = recovery(kind, sizes, Path(tmp))
    for name, by_kind in results.items():
        d, a = by_kind.get("dovecote"), by_kind.get("activemq")
        rows.append(
            Row(f"{name}: msg/s", d and d.rate, a and a.rate, True, ",.0f", pair_ratios[name])
        )
        for q in (0.5, 0.99):
            dl, al = d and d.percentile(q), a and a.percentile(q)
            if dl is not None or al is not None:
                rows.append(Row(f"{name}: p{int(q * 100)} latency ms", dl, al, False, ".2f"))
        dc = d and d.cpu_s * 100_000 / max(d.messages, 1)
        ac = a and a.cpu_s * 100_000 / max(a.messages, 1)
        rows.append(Row(f"{name}: broker CPU s per 100k", dc, ac, False, ".2f"))
        if d and a and d.client_cpu_s is not None and a.client_cpu_s is not None:
            rows.append(
                Row(
                    f"{name}: the load's own CPU s per 100k",
                    d.client_cpu_s * 100_000 / max(d.messages, 1),
                    a.client_cpu_s * 100_000 / max(a.messages, 1),
                    False,
                    ".2f",
                )
            )
            notes.append(client_bound(name, d, a))
        if d and a and name in heavy:
            rows.append(
                Row(
                    f"{name}: MB/s written to disk",
                    d.disk_bytes / d.seconds / 1e6 if d.seconds > 0 else None,
                    a.disk_bytes / a.seconds / 1e6 if a.seconds > 0 else None,
                    True,
                    ".0f",
                )
            )
            notes.append(
                disk.disk_note(
                    name,
                    (d.messages, a.messages),
                    (d.disk_bytes, a.disk_bytes),
                    (d.seconds, a.seconds),
                    probe_mb_s,
                )
            )
    rows.append(Row("idle RSS MiB", idle["dovecote"] / 1024, idle["activemq"] / 1024, False, ".1f"))
    if runtime_idle:
        rows.append(
            Row(
                "idle RSS MiB of the runtime alone (Python with asyncio and uvloop; the JVM)",
                runtime_idle["dovecote"] / 1024,
                runtime_idle["activemq"] / 1024,
                False,
                ".1f",
            )
        )
        notes.append(
            f"idle RSS: a fifth of ActiveMQ's is {idle['activemq'] / 5 / 1024:.1f} MiB; the"
            f" interpreter with its event loop alone takes {runtime_idle['dovecote'] / 1024:.1f}"
            f" MiB of dovecote's {idle['dovecote'] / 1024:.1f} (the JVM alone"
            f" {runtime_idle['activemq'] / 1024:.1f} of ActiveMQ's {idle['activemq'] / 1024:.1f})"
        )
    rows.append(Row("peak RSS MiB", peak["dovecote"] / 1024, peak["activemq"] / 1024, False, ".1f"))
    if starts:
        rows.append(
            Row(
                "start time s (empty store)",
                starts["dovecote"][0],
                starts["activemq"][0],
                False,
                ".2f",
            )
        )
        rows.append(
            Row(
                f"restart to first message s ({sizes.recovery_messages:,} stored)",
                starts["dovecote"][1],
                starts["activemq"][1],
                False,
                ".2f",
            )
        )
    return rows, notes


def client_bound(name: str, d: Measure, a: Measure) -> str:
    """What the load's own CPU leaves possible: on this machine's cores no broker, even one
    that cost nothing, could finish dovecote's run faster than that CPU spread over them."""
    cores = os.cpu_count() or 1
    floor_s = d.client_cpu_s / cores if d.client_cpu_s else 0.0
    best = f"{d.messages / floor_s / a.rate:.2f}x" if floor_s and a.rate else "-"
    return (
        f"{name}: the load's processes used {d.client_cpu_s or 0:.2f} s of CPU in dovecote's"
        f" run ({a.client_cpu_s or 0:.2f} s in ActiveMQ's), at least {floor_s:.2f} s of the"
        f" {cores} cores: with a broker costing nothing the row would be at most {best}"
        f" (it took {d.seconds:.2f} s against ActiveMQ's {a.seconds:.2f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the issue's sizes (long)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "RESULTS.md")
    parser.add_argument("--only", nargs="*", default=[], help="workloads whose name contains")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each workload; the median is shown"
    )
    parser.add_argument(
        "--secured", action="store_true", help="authentication and authorization on, STOMP rows"
    )
    args = parser.parse_args()
    command = "python bench/harness.py" + (" --full" if args.full else "")
    if args.repeat > 1:
        command += f" --repeat {args.repeat}"
    only = args.only
    if args.secured:
        global SECURED
        SECURED = True
        loadgen.LOGIN = ("admin", USERS["admin"][0])
        command += " --secured"
        # The OpenWire loads (ActiveMQ's tools, owload.py) do not log in; nor do the
        # runtime and recovery rows concern security.
        only = only or [w.name for w in WORKLOADS if not w.name.startswith("OpenWire")]
        if args.out == ROOT / "bench" / "RESULTS.md":
            args.out = ROOT / "bench" / "RESULTS-secured.md"
    rows, notes = run(FULL if args.full else SHORT, only, max(args.repeat, 1))
    text = markdown(rows, notes, command)
    if not args.only:
        args.out.write_text(text)
    print(text)
    if _pool is not None:
        _pool.shutdown()


if __name__ == "__main__":
    main()
