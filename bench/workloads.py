"""The workloads bench/harness.py runs against each broker, and what it reads from a broker
process while they run: each workload is a function of the broker under test and the run's
sizes, returning what it measured. The load comes from bench/loadgen.py (raw pipelined
STOMP, a process per producer and consumer, speaking each peer's dialect), bench/owload.py
(raw pipelined OpenWire) and ActiveMQ's own producer and consumer tools.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import disk
import loadgen
import network_forwarding
import owload
import runtimes

from activemq import HOME as AMQ_HOME

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TOOLS_LOG4J = ROOT / "bench" / "log4j.properties"
"""ActiveMQ's command-line tools print nothing without a log4j appender; warnings only."""


# -- the broker under test, as the workloads see it ------------------------------------------


@dataclass
class Broker:
    kind: str
    pid: int
    stomp_port: int
    openwire_port: int
    start_s: float
    idle_rss_kib: int = 0
    other_pids: tuple[int, ...] = ()
    """A pair's broker B (the network rows): its CPU and memory are counted with A's."""
    forward_stomp_port: int = 0
    """A pair's broker B, where the forwarded messages are consumed."""

    @property
    def pids(self) -> tuple[int, ...]:
        return (self.pid, *self.other_pids)

    def cpu_s(self) -> float:
        total = 0
        for pid in self.pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        return total / CLOCK_TICKS

    def status(self, key: str) -> int:
        return sum(runtimes.status_kib(pid, key) or 0 for pid in self.pids)

    def rss_kib(self) -> int:
        return self.status("VmRSS")


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
    seconds_from_first: float = 0.0
    """A drain's time from its first message (without the wait for it)."""

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
    missing: dict[str, str] = field(default_factory=dict)
    """The peers that cannot run it, and why."""
    pairs: bool = False
    """It runs on bridged pairs of brokers (network forwarding), not the single brokers."""


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
    forward_messages: int


SHORT = Sizes(20_000, 20_000, 2_000, 10_000, 10_000, 5_000, 500, 20_000, 20_000, 10_000)
FULL = Sizes(100_000, 100_000, 10_000, 50_000, 50_000, 20_000, 2_000, 100_000, 1_000_000, 50_000)

_pool: ProcessPoolExecutor | None = None


def pool() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(max_workers=16, mp_context=mp.get_context("fork"))
    return _pool


def shutdown_pool() -> None:
    if _pool is not None:
        _pool.shutdown()


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
            peer=broker.kind,
            durable=persistent,
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
            broker.kind,
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


def fill(b: Broker, name: str, count: int, persistent: bool = True) -> None:
    """Send ``count`` messages of 1 KiB to ``name`` on ``b`` (async) and wait until the
    broker has them all."""
    manager = mp.Manager()
    barrier = manager.Barrier(1)
    pool().submit(
        loadgen.produce, b.stomp_port, name, count, 1024, persistent, False, 0, barrier, b.kind
    ).result(timeout=3600)
    manager.shutdown()


def drained(b: Broker, port: int, name: str, count: int, durable: bool) -> Measure:
    """A consumer on ``port`` takes the ``count`` messages waiting for it on ``name``: timed
    from its subscribing, and (``seconds_from_first``) from its first message."""
    manager = mp.Manager()
    ready = manager.Event()
    cpu0 = b.cpu_s()
    t0 = time.monotonic()
    result = (
        pool()
        .submit(loadgen.consume, port, [name], count, ready, peer=b.kind, durable=durable)
        .result(1800)
    )
    manager.shutdown()
    m = Measure(result.received, result.finished - t0, [], b.cpu_s() - cpu0, b.status("VmHWM"))
    m.seconds_from_first = result.finished - result.first if result.first else m.seconds
    if result.received < count:
        m.note = f"only {result.received} of {count} drained"
    return m


def backlog_drain(b: Broker, s: Sizes) -> Measure:
    """Fill a queue first (persistent, async), then time only the drain."""
    name = f"/queue/{_queue_name('backlog')}"
    fill(b, name, s.backlog)
    return drained(b, b.stomp_port, name, s.backlog, durable=True)


def forwarded(b: Broker, count: int, persistent: bool) -> Measure:
    """A backlog sent to a pair's A with no consumer anywhere, then drained by a consumer
    on B through A's bridge: timed from B's first message to its last (the consumer
    advisory's trip to A and the bridge's subscribing are not forwarding)."""
    name = f"/queue/{_queue_name('fwd')}"
    fill(b, name, count, persistent)
    m = drained(b, b.forward_stomp_port, name, count, durable=persistent)
    m.seconds = m.seconds_from_first
    return m


def forward_persistent(b: Broker, s: Sizes) -> Measure:
    return forwarded(b, s.forward_messages, persistent=True)


def forward_non_persistent(b: Broker, s: Sizes) -> Measure:
    return forwarded(b, s.forward_messages, persistent=False)


def sync_1(b: Broker, s: Sizes) -> Measure:
    return traffic(
        b, f"/queue/{_queue_name('sync1')}", 1, 1, s.sync_messages, persistent=True, sync=True
    )


def sync_1_stored(b: Broker, s: Sizes) -> Measure:
    """The lone synchronous producer with nobody consuming: every broker must store each
    message before its receipt (RabbitMQ confirms one its consumer has already taken
    without writing it)."""
    manager = mp.Manager()
    start = manager.Barrier(1)
    name = f"/queue/{_queue_name('sync1stored')}"
    cpu0, written0 = b.cpu_s(), disk.written_bytes(b.pid)
    result = (
        pool()
        .submit(loadgen.produce, b.stomp_port, name, s.sync_messages, 1024, True, True, 0, start,
                b.kind)
        .result(1800)
    )  # fmt: skip
    manager.shutdown()
    return Measure(
        result.sent,
        result.finished - result.started,
        result.latencies_ns,
        b.cpu_s() - cpu0,
        b.status("VmHWM"),
        disk_bytes=disk.written_bytes(b.pid) - written0,
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


NO_OPENWIRE = {"rabbitmq": "RabbitMQ speaks no OpenWire (AMQP, STOMP, MQTT)"}
NO_NETWORK = {"rabbitmq": network_forwarding.NO_NETWORK}
SYNC_1 = "persistent sync send, 1 producer"

WORKLOADS = [
    Workload("non-persistent queue 1→1", np_1_1),
    Workload("non-persistent queue 4→4", np_4_4),
    Workload("backlog drained (persistent)", backlog_drain),
    Workload(SYNC_1, sync_1),
    Workload(f"{SYNC_1}, nobody consuming", sync_1_stored),
    Workload("persistent sync send, 8 producers", sync_8),
    Workload("persistent async send", persistent_async),
    Workload("transacted batches of 100", transacted_100),
    Workload("topic fan-out 1→8 (deliveries)", fanout_1_8),
    Workload("100 KiB persistent messages", large_100k, disk_heavy=True),
    Workload("OpenWire, ActiveMQ's tools", openwire_tools, missing=NO_OPENWIRE),
    Workload("OpenWire, raw pipelined load, non-persistent 1→1", openwire_raw, missing=NO_OPENWIRE),
    Workload(
        "forwarded A→B by a network connector, persistent backlog",
        forward_persistent,
        missing=NO_NETWORK,
        pairs=True,
    ),
    Workload(
        "forwarded A→B by a network connector, non-persistent backlog",
        forward_non_persistent,
        missing=NO_NETWORK,
        pairs=True,
    ),
]
