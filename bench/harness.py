"""dovecote, ActiveMQ 5.17 and RabbitMQ 3.10 side by side: the same workloads against each in
one run, one Markdown table with dovecote's ratio against each peer and against the best of
them on every row (issues 7 and 33).

    .venv/bin/python bench/harness.py [--full] [--repeat N] [--out FILE] [--only NAME ...]
                                      [--secured] [--peers KIND ...]

``make bench`` runs the short form three times over (a few minutes; each figure is from the
median run); ``--full`` uses the issue's sizes (a 100k backlog, 1M messages for recovery).
The brokers run on loopback, at the same time, with equivalent stores: dovecote's journal,
ActiveMQ's KahaDB and RabbitMQ's message store (durable queues, persistent messages), all
syncing to disk before confirming a persistent send. Each workload's runs alternate between
them (dovecote, ActiveMQ, RabbitMQ, then the other way round), each once all are quiet, so
that the machine's drift over minutes falls on all alike. RabbitMQ (bench/rabbitmq.py) runs
the STOMP workloads; a row it cannot run (OpenWire, network connectors) says "n/a" and why.
Without ``rabbitmq-server`` installed (``make bench-deps``) its column is n/a throughout.
The network rows run on bridged pairs (bench/network_forwarding.py), a dovecote pair
against an ActiveMQ pair, after the single brokers have stopped.
The load comes from bench/loadgen.py (separate processes, raw pipelined STOMP), for one
OpenWire row from ActiveMQ's own producer and consumer tools (a JVM each, for both brokers)
and for the other from bench/owload.py (raw pipelined OpenWire, a process each).

``--secured`` runs both brokers with authentication and authorization on, configured alike
(tests/securitykit.py: users, groups and an authorization map; the load logs in as a user
with every right), for the STOMP workloads, into bench/RESULTS-secured.md: beside
RESULTS.md it shows what security costs each broker. RabbitMQ is not configured with users
here and sits that run out.

For every ratio, higher is better for dovecote: throughput ratios are dovecote/peer,
latency, CPU, memory and time ratios are peer/dovecote. The broker's CPU seconds and RSS
come from /proc for the broker process itself (the JVM for ActiveMQ, the Erlang VM for
RabbitMQ; both brokers of a pair on the network rows).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the test fixtures that start both brokers
sys.path.insert(0, str(ROOT / "bench"))

import disk  # noqa: E402
import loadgen  # noqa: E402
import network_forwarding  # noqa: E402
import rabbitmq  # noqa: E402
import runtimes  # noqa: E402
import targets  # noqa: E402
from bounds import RunFacts  # noqa: E402
from table import PEERS, TITLES, Row, markdown  # noqa: E402
from workloads import (  # noqa: E402
    FULL,
    SHORT,
    SYNC_1,
    WORKLOADS,
    Broker,
    Measure,
    Sizes,
    Workload,
    fill,
    shutdown_pool,
)

from activemq import accepts, running_activemq  # noqa: E402
from brokers import running_broker  # noqa: E402
from securitykit import USERS, activemq_plugins, dovecote_toml  # noqa: E402

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
    elif kind == "rabbitmq":
        with rabbitmq.running_rabbitmq(workdir) as rmq:
            yield _settle(Broker(kind, rmq.pid, rmq.stomp_port, 0, time.monotonic() - t0))
    else:
        plugins = activemq_plugins(allow_anonymous=False) if SECURED else ""
        with running_activemq(workdir, openwire_port, plugins=plugins) as amq:
            broker = Broker(
                kind, amq.process.pid, amq.stomp_port, amq.openwire_port, time.monotonic() - t0
            )
            yield _settle(broker)


@contextmanager
def started_pair(kind: str, workdir: Path) -> Iterator[Broker]:
    """A bridged to B (bench/network_forwarding.py), as one broker under test: sends go to
    A, forwarded messages are consumed on B, CPU and memory are both brokers'."""
    t0 = time.monotonic()
    with network_forwarding.PAIRS[kind](workdir) as pair:
        yield _settle(
            Broker(
                kind,
                pair.a_pid,
                pair.a_stomp,
                pair.a_openwire,
                time.monotonic() - t0,
                other_pids=(pair.b_pid,),
                forward_stomp_port=pair.b_stomp,
            )
        )


def _settle(broker: Broker) -> Broker:
    """Idle RSS: after start-up has finished allocating (a JVM keeps going for a moment)."""
    time.sleep(1.0)
    broker.idle_rss_kib = broker.rss_kib()
    return broker


def recovery(kind: str, s: Sizes, workdir: Path) -> tuple[float, float]:
    """(start time with an empty store, restart time with ``recovery_messages`` stored)."""
    with started(kind, workdir) as b:
        empty_start = b.start_s
        port = b.openwire_port
        fill(b, "/queue/bench.recovery", s.recovery_messages)
    t0 = time.monotonic()
    with started(kind, workdir, port) as b:
        # Recovered means a consumer gets the first stored message. (A consumer that counts
        # until its subscription's receipt would take the whole backlog from a broker that
        # dispatches before it answers: client acks and a window of one.)
        loadgen.first_message(b.stomp_port, "/queue/bench.recovery", peer=kind)
        restart = time.monotonic() - t0 - 1.0  # _settle's pause is not recovery
    return empty_start, restart


# -- the run ----------------------------------------------------------------------------------


KINDS = ("dovecote", *PEERS)


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
    """Every run of every workload, alternating between the brokers (A B C, then C B A, ...),
    all running throughout. This machine drifts over minutes (the shared disk's latency, a
    neighbour's load: a broker's rate moved by 2x between runs an hour apart); taken in
    turns, a drift falls on all brokers alike instead of on whichever ran then. A broker
    the workload names as ``missing`` sits it out.

    Each workload first runs once on each broker at ``warm_up``'s sizes, not measured:
    ActiveMQ's JIT compiles a workload's paths during its first run (a cold non-persistent
    run made 19k msg/s, the next 39k), and a broker in service is warm."""
    runs: dict[str, dict[str, list[Measure]]] = {}
    for w in workloads:
        kinds = [kind for kind in brokers if kind not in w.missing]
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


@dataclass
class Run:
    """What one run of the harness measured, before it becomes rows."""

    kinds: tuple[str, ...]
    absent: dict[str, str]
    """Peers not started at all, and why (not installed, not configured for --secured)."""
    runs: dict[str, dict[str, list[Measure]]] = field(default_factory=dict)
    idle_kib: dict[str, int] = field(default_factory=dict)
    peak_kib: dict[str, int] = field(default_factory=dict)
    runtime_idle_kib: dict[str, int] = field(default_factory=dict)
    starts: dict[str, tuple[float, float]] = field(default_factory=dict)
    probe_mb_s: float = 0.0
    appends_per_s: float = 0.0

    def missing(self, w: Workload | None = None) -> dict[str, str]:
        reasons = dict(self.absent)
        if w is not None:
            reasons.update({k: why for k, why in w.missing.items() if k not in reasons})
        return reasons


def measure(
    sizes: Sizes, only: list[str], repeat: int, kinds: tuple[str, ...]
) -> tuple[Run, list[Workload]]:
    absent = {k: ABSENT.get(k, "not run") for k in PEERS if k not in kinds}
    if "rabbitmq" in kinds and (why := rabbitmq.missing_reason()) is not None:
        kinds = tuple(k for k in kinds if k != "rabbitmq")
        absent["rabbitmq"] = why
    result = Run(kinds, absent)
    if not only or any("runtime" in o for o in only):
        print("  the runtimes alone ...", file=sys.stderr, flush=True)
        result.runtime_idle_kib = {k: runtimes.IDLE_RSS_KIB[k]() for k in kinds}
    selected = [w for w in WORKLOADS if not only or any(o in w.name for o in only)]
    here = Path(tempfile.gettempdir())
    if any(w.disk_heavy for w in selected):
        result.probe_mb_s = disk.synced_write_mb_s(here)
    if any(w.name == SYNC_1 for w in selected):
        result.appends_per_s = disk.synced_appends_per_s(here)
    for pairs, start in ((False, started), (True, started_pair)):
        chosen = [w for w in selected if w.pairs == pairs]
        if not chosen:
            continue
        with ExitStack() as stack:
            brokers: dict[str, Broker] = {}
            for kind in kinds:
                if pairs and kind not in network_forwarding.PAIRS:
                    continue
                tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"bench-{kind}-"))
                brokers[kind] = stack.enter_context(start(kind, Path(tmp)))
            result.runs.update(side_by_side(brokers, chosen, sizes, repeat))
            if not pairs:
                result.idle_kib = {kind: b.idle_rss_kib for kind, b in brokers.items()}
                result.peak_kib = {kind: b.status("VmHWM") for kind, b in brokers.items()}
    for kind in kinds:
        if not only or any("recovery" in o for o in only):
            with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-rec-") as tmp:
                print(f"  {kind}: start and recovery ...", file=sys.stderr, flush=True)
                result.starts[kind] = recovery(kind, sizes, Path(tmp))
    return result, selected


def run(
    sizes: Sizes, only: list[str], repeat: int = 1, kinds: tuple[str, ...] = KINDS
) -> tuple[list[Row], list[str]]:
    measured, selected = measure(sizes, only, repeat, kinds)
    rows: list[Row] = []
    notes: list[str] = []
    facts: dict[str, RunFacts] = {}
    for w in selected:
        if w.name in measured.runs:
            rows += workload_rows(w, measured, notes, facts)
    rows += memory_rows(measured, notes)
    starts = measured.starts
    if starts:
        missing = measured.missing()
        rows.append(
            Row(
                "start time s (empty store)",
                {k: v[0] for k, v in starts.items()},
                False,
                ".2f",
                missing=missing,
            )
        )
        rows.append(
            Row(
                f"restart to first message s ({sizes.recovery_messages:,} stored)",
                {k: v[1] for k, v in starts.items()},
                False,
                ".2f",
                missing=missing,
            )
        )
    notes += targets.below_best(rows, facts)
    return rows, notes


def workload_rows(
    w: Workload, measured: Run, notes: list[str], facts: dict[str, RunFacts] | None = None
) -> list[Row]:
    """A workload's rows (throughput, latencies, CPU, and what applies to it alone) from the
    median run of each broker; ``notes`` gets what is said under the table, ``facts`` what
    the run showed that bounds the row (bench/bounds.py)."""
    by_kind = measured.runs[w.name]
    med = {kind: median_run(runs) for kind, runs in by_kind.items()}
    missing = measured.missing(w)
    d = med["dovecote"]
    pair_ratios = {
        peer: [x.rate / y.rate for x, y in zip(by_kind["dovecote"], runs, strict=True) if y.rate]
        for peer, runs in by_kind.items()
        if peer != "dovecote"
    }
    rows = [
        Row(f"{w.name}: msg/s", {k: m.rate for k, m in med.items()}, True, ",.0f",
            pair_ratios, missing)
    ]  # fmt: skip
    if w.name == SYNC_1 and measured.appends_per_s:
        target = targets.sync_send_target(measured.appends_per_s)
        rows.append(targets.sync_send_row(w.name, d.rate, target, measured.appends_per_s))
        notes.append(targets.sync_send_note(w.name, d.rate, target, measured.appends_per_s))
    for q in (0.5, 0.99):
        latencies = {k: m.percentile(q) for k, m in med.items()}
        if any(v is not None for v in latencies.values()):
            rows.append(
                Row(f"{w.name}: p{int(q * 100)} latency ms", latencies, False, ".2f",
                    missing=missing)
            )  # fmt: skip
    cpu = {k: m.cpu_s * 100_000 / max(m.messages, 1) for k, m in med.items()}
    rows.append(Row(f"{w.name}: broker CPU s per 100k", cpu, False, ".2f", missing=missing))
    a = med.get("activemq")
    if a and d.client_cpu_s is not None and a.client_cpu_s is not None:
        rows.append(
            Row(
                f"{w.name}: the load's own CPU s per 100k",
                {k: (m.client_cpu_s or 0.0) * 100_000 / max(m.messages, 1) for k, m in med.items()},
                False,
                ".2f",
                missing=missing,
            )
        )
        notes.append(client_bound(w.name, d, a))
    per_message = {k: m.disk_bytes / max(m.messages, 1) for k, m in med.items()}
    if facts is not None:
        facts[w.name] = RunFacts(per_message, client_ceiling(d, a) if a else None)
    unstored = disk.unstored_note(w.name, per_message, TITLES)
    notes += [unstored] if unstored else []
    if w.disk_heavy:
        written = {
            k: m.disk_bytes / m.seconds / 1e6 if m.seconds > 0 else None for k, m in med.items()
        }
        rows.append(Row(f"{w.name}: MB/s written to disk", written, True, ".0f", missing=missing))
        figures = {k: (m.messages, m.disk_bytes, m.seconds) for k, m in med.items()}
        notes.append(disk.disk_note(w.name, figures, TITLES, measured.probe_mb_s))
    return rows


def memory_rows(measured: Run, notes: list[str]) -> list[Row]:
    """Idle RSS with the issue's target, the runtimes alone, peak RSS."""
    missing = measured.missing()
    mib = {k: v / 1024 for k, v in measured.idle_kib.items()}
    if not mib:
        return []
    rows = [Row("idle RSS MiB", dict(mib), False, ".1f", missing=missing)]
    alone = {k: v / 1024 for k, v in measured.runtime_idle_kib.items()}
    if alone:
        rows.append(
            Row(
                "idle RSS MiB of the runtime alone (Python with asyncio and uvloop; the JVM;"
                " the Erlang VM)",
                alone,
                False,
                ".1f",
                missing=missing,
            )
        )
    notes.append(targets.idle_note(mib, alone))
    peak = {k: v / 1024 for k, v in measured.peak_kib.items()}
    rows.append(Row("peak RSS MiB", peak, False, ".1f", missing=missing))
    return rows


def client_bound(name: str, d: Measure, a: Measure) -> str:
    """What the load's own CPU leaves possible: on this machine's cores no broker, even one
    that cost nothing, could finish dovecote's run faster than that CPU spread over them."""
    cores = os.cpu_count() or 1
    floor_s = d.client_cpu_s / cores if d.client_cpu_s else 0.0
    ceiling = client_ceiling(d, a)
    best = f"{ceiling:.2f}x" if ceiling is not None else "-"
    return (
        f"{name}: the load's processes used {d.client_cpu_s or 0:.2f} s of CPU in dovecote's"
        f" run ({a.client_cpu_s or 0:.2f} s in ActiveMQ's), at least {floor_s:.2f} s of the"
        f" {cores} cores: with a broker costing nothing the row would be at most {best}"
        f" (it took {d.seconds:.2f} s against ActiveMQ's {a.seconds:.2f} s)"
    )


def client_ceiling(d: Measure, a: Measure) -> float | None:
    """The ratio against ActiveMQ a broker costing nothing would reach: dovecote's run no
    faster than the load's own CPU spread over the cores (None: the load's CPU unknown)."""
    floor_s = (d.client_cpu_s or 0.0) / (os.cpu_count() or 1)
    return d.messages / floor_s / a.rate if floor_s and a.rate else None


ABSENT = {"rabbitmq": "RabbitMQ left out of this run (--peers)"}
SECURED_ABSENT = "--secured: RabbitMQ is not configured with users and permissions here"


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
    parser.add_argument(
        "--peers", nargs="*", choices=PEERS, default=list(PEERS), help="the peers to run"
    )
    args = parser.parse_args()
    command = "python bench/harness.py" + (" --full" if args.full else "")
    if args.repeat > 1:
        command += f" --repeat {args.repeat}"
    only = args.only
    peers = tuple(args.peers)
    if args.secured:
        global SECURED
        SECURED = True
        loadgen.LOGIN = ("admin", USERS["admin"][0])
        command += " --secured"
        peers = tuple(p for p in peers if p != "rabbitmq")
        ABSENT["rabbitmq"] = SECURED_ABSENT
        # The OpenWire loads (ActiveMQ's tools, owload.py) do not log in; nor do the
        # runtime, recovery and network rows concern security.
        only = only or [
            w.name for w in WORKLOADS if not w.name.startswith("OpenWire") and not w.pairs
        ]
        if args.out == ROOT / "bench" / "RESULTS.md":
            args.out = ROOT / "bench" / "RESULTS-secured.md"
    elif set(peers) != set(PEERS):
        command += " --peers " + " ".join(peers)
    rows, notes = run(FULL if args.full else SHORT, only, max(args.repeat, 1), ("dovecote", *peers))
    text = markdown(rows, notes, command, PEERS)
    if not args.only:
        args.out.write_text(text)
    print(text)
    shutdown_pool()


if __name__ == "__main__":
    main()
