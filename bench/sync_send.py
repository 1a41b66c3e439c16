"""The lone synchronous producer (issue 33), measured on its own: what one STOMP producer
sending persistent 1 KiB messages and waiting for each receipt gets, what the broker spends
per send (user and system CPU), and what the disk takes for a synced append of that size in
the same run, so that the row reads against the disk.

    .venv/bin/python bench/sync_send.py [--messages N] [--producers P] [--rounds R]
                                        [--src A --src B ...] [--strace] [--openwire]

The load is harness.py's row (bench/loadgen.py: one producer, a receipt per send, one auto-ack
consumer), against dovecote alone with the harness's store settings. Each ``--src`` is a
source tree (its ``src`` directory goes first on the broker's PYTHONPATH; the default is the
installed one). With several, every round runs each tree once, alternating their order, so
that a busy neighbour falls on each alike: on a shared machine compare the pairs, and the CPU
per send more than the rate. ``--strace`` counts the broker's syscalls per send instead (it
slows the broker down: its rates mean nothing).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import loadgen  # noqa: E402
import owload  # noqa: E402

from brokers import running_broker  # noqa: E402

CONFIG = """
[broker]
name = "bench"
[store]
kind = "journal"
enable_journal_disk_syncs = true
"""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
APPEND_BYTES = 1100
"""A 1 KiB message's journal record, about."""


def synced_appends_per_s(directory: Path, seconds: float = 2.0) -> float:
    """Appends of APPEND_BYTES to a preallocated file, each fsynced, as the journal does for
    a lone producer: how many a second."""
    fd, name = tempfile.mkstemp(dir=directory, prefix="append-probe-")
    try:
        os.posix_fallocate(fd, 0, 32 << 20)
        chunk = os.urandom(APPEND_BYTES)
        count, offset = 0, 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            os.pwrite(fd, chunk, offset)
            os.fsync(fd)
            offset += APPEND_BYTES
            count += 1
        return count / (time.perf_counter() - started)
    finally:
        os.close(fd)
        os.unlink(name)


def cpu_ticks(pid: int) -> tuple[int, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def context_switches(pid: int) -> int:
    """The broker's context switches so far, voluntary and not, all its threads: each is a
    wake-up, and on a loaded machine each wake-up waits for a core."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "status").read_text()
        except FileNotFoundError:
            continue  # a thread that ended meanwhile
        for line in text.splitlines():
            if line.endswith("ctxt_switches:") or "ctxt_switches:" in line:
                total += int(line.split()[1])
    return total


@dataclass
class Result:
    rate: float
    user_us: float
    sys_us: float
    p50_ms: float
    p99_ms: float
    switches: float
    """Context switches of the broker per send."""


def one_run(port: int, pid: int, messages: int, producers: int, openwire_port: int = 0) -> Result:
    """With ``openwire_port`` the producers send over OpenWire (bench/owload.py: a JMS
    producer's synchronous persistent send, a Response per message), the consumer as ever."""
    manager = mp.Manager()
    start = manager.Barrier(producers + 1)
    ready = manager.Event()
    destination = f"/queue/sync.{time.monotonic_ns()}"
    total = messages
    ctx = mp.get_context("fork")
    with ctx.Pool(producers + 1) as pool:
        consumer = pool.apply_async(loadgen.consume, (port, [destination], total, ready))
        ready.wait(60)
        each = messages // producers
        if openwire_port:
            queue = destination.removeprefix("/queue/")
            prods = [
                pool.apply_async(owload.produce_sync, (openwire_port, queue, each, 1024, start))
                for _ in range(producers)
            ]
        else:
            prods = [
                pool.apply_async(
                    loadgen.produce, (port, destination, each, 1024, True, True, 0, start)
                )
                for _ in range(producers)
            ]
        user0, sys0 = cpu_ticks(pid)
        switches0 = context_switches(pid)
        start.wait()
        t0 = time.monotonic()
        results = [p.get(1800) for p in prods]
        received = consumer.get(1800)
        seconds = max(r.finished for r in results) - t0
        user1, sys1 = cpu_ticks(pid)
        switches = context_switches(pid) - switches0
    manager.shutdown()
    sent = sum(r.sent for r in results)
    if received.received < sent:
        print(f"only {received.received} of {sent} received", file=sys.stderr)
    latencies = sorted(x for r in results for x in r.latencies_ns)
    tick_us = 1e6 / CLOCK_TICKS
    return Result(
        sent / seconds,
        (user1 - user0) * tick_us / sent,
        (sys1 - sys0) * tick_us / sent,
        latencies[len(latencies) // 2] / 1e6,
        latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] / 1e6,
        switches / sent,
    )


def strace_counts(port: int, pid: int, messages: int, producers: int) -> None:
    out = Path(tempfile.mkstemp(prefix="strace-")[1])
    tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid), "-o", str(out)])
    time.sleep(1.0)
    one_run(port, pid, messages, producers)
    tracer.send_signal(signal.SIGINT)
    tracer.wait(30)
    print(f"syscalls per send ({messages} sends; the consumer's and the broker's all):")
    for line in out.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[3].isdigit():
            calls = int(parts[3])
            name = parts[-1]
            print(f"  {name:16} {calls / messages:6.2f}")
    out.unlink()


def callgrind_instructions(
    tree: str, workdir: Path, messages: int, producers: int, openwire: bool = False
) -> float:
    """Instructions the broker's process executes per send (user space, all threads), under
    callgrind: a count that a busy neighbour does not change, unlike a rate or a CPU time.
    Counted from the warm-up's end to the run's."""
    config = workdir / "dovecote.toml"
    config.write_text(CONFIG)
    out = workdir / "callgrind.out"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if tree:
        env["PYTHONPATH"] = str(Path(tree) / "src")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
           sys.executable, "-m", "dovecote", "broker", "--stomp-port", "0", "--openwire-port",
           "0", "--console-port", "0", "--config", str(config)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        while not (line := proc.stdout.readline()).startswith("dovecote ready:"):
            if not line:
                raise RuntimeError("the broker under valgrind exited")
        ports = {k: int(v.rsplit(":", 1)[1]) for k, v in (f.split("=") for f in line.split()[2:])}
        port, ow = ports["stomp"], ports["openwire"] if openwire else 0
        one_run(port, proc.pid, 300, producers, ow)
        subprocess.run(["callgrind_control", "--instr=on", str(proc.pid)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        one_run(port, proc.pid, messages, producers, ow)
        subprocess.run(["callgrind_control", "--dump", str(proc.pid)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(60)
    total = 0
    for dump in workdir.glob("callgrind.out.*"):  # the dump asked for, not the one at exit
        for text in dump.read_text(errors="replace").splitlines():
            if text.startswith("summary:"):
                total += int(text.split()[1])
    return total / messages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--src", action="append", default=[])
    parser.add_argument("--strace", action="store_true")
    parser.add_argument(
        "--openwire", action="store_true", help="the producers send over OpenWire (owload.py)"
    )
    parser.add_argument(
        "--callgrind", action="store_true", help="count the broker's instructions per send instead"
    )
    parser.add_argument(
        "--dir",
        help="where the stores go (default: the temporary directory;"
        " /dev/shm makes fsyncs free, leaving the broker's own costs)",
    )
    args = parser.parse_args()
    trees = args.src or [""]
    probes: list[float] = []
    runs: dict[str, list[Result]] = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory(prefix="sync-send-", dir=args.dir) as tmp:
        for round_ in range(args.rounds):
            probes.append(synced_appends_per_s(Path(tmp)))
            for tree in trees if round_ % 2 == 0 else trees[::-1]:
                env = {"PYTHONPATH": str(Path(tree) / "src")} if tree else {}
                workdir = Path(tmp) / f"broker-{round_}-{trees.index(tree)}"
                workdir.mkdir()
                if args.callgrind:
                    count = callgrind_instructions(
                        tree, workdir, args.messages, args.producers, args.openwire
                    )
                    print(f"{tree or 'installed'}: {count:,.0f} instructions per send", flush=True)
                    continue
                with running_broker(CONFIG, workdir, env=env) as broker:
                    pid, port = broker.process.pid, broker.stomp_port
                    ow = broker.openwire_port if args.openwire else 0
                    one_run(port, pid, min(args.messages, 500), args.producers, ow)  # warm-up
                    if args.strace:
                        strace_counts(port, pid, args.messages, args.producers)
                        continue
                    r = one_run(port, pid, args.messages, args.producers, ow)
                    runs[tree].append(r)
                    print(
                        f"{tree or 'installed'}: {r.rate:,.0f} msg/s, user {r.user_us:.0f} us"
                        f" + sys {r.sys_us:.0f} us, {r.switches:.1f} context switches per"
                        f" send, p50 {r.p50_ms:.2f} ms, p99 {r.p99_ms:.2f} ms",
                        flush=True,
                    )
    disk = statistics.median(probes)
    print(f"synced {APPEND_BYTES}-byte appends: {disk:,.0f}/s (median of {probes})")
    for tree, results in runs.items():
        if not results:
            continue
        med = sorted(results, key=lambda r: r.rate)[len(results) // 2]
        print(
            f"{tree or 'installed'} median: {med.rate:,.0f} msg/s ({med.rate / disk:.0%} of the"
            f" disk), user {statistics.median(r.user_us for r in results):.0f} us + sys"
            f" {statistics.median(r.sys_us for r in results):.0f} us,"
            f" {statistics.median(r.switches for r in results):.1f} context switches per send, p50"
            f" {med.p50_ms:.2f} ms, p99 {med.p99_ms:.2f} ms"
        )


if __name__ == "__main__":
    main()
