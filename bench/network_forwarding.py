"""Forwarding through a network bridge (issue 30): a dovecote pair against an ActiveMQ 5.17
pair in the same run. Broker A has a network connector to broker B; a backlog of N messages
is sent to a queue on A while B has no consumer (nothing moves), then a consumer on B
subscribes and the time until it has all N is measured: the consumer advisory reaching A,
A's bridge subscribing, and every message stored and forwarded (persistent: each one
answered by B before A removes its copy) or sent on (non-persistent).

    .venv/bin/python bench/network_forwarding.py [--count N] [--size BYTES] [--out FILE]

Both pairs run on loopback with their default stores (dovecote's journal, KahaDB), syncing
before confirming a persistent send. The load is bench/loadgen.py's raw STOMP (a producer
process on A, a consumer process on B). Prints one Markdown table; --out appends it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import loadgen  # noqa: E402

from activemq import running_activemq  # noqa: E402
from brokers import running_broker  # noqa: E402
from ports import free_port  # noqa: E402


@contextmanager
def dovecote_pair(workdir: Path) -> Iterator[tuple[int, int]]:
    """(A's STOMP port, B's STOMP port), A bridged to B."""
    b_port = free_port()
    with ExitStack() as stack:
        (workdir / "b").mkdir()
        (workdir / "a").mkdir()
        b = stack.enter_context(
            running_broker('[broker]\nname = "B"\n', workdir / "b", openwire_port=b_port)
        )
        a_config = (
            '[broker]\nname = "A"\n[[network_connectors]]\nname = "a-b"\n'
            f'uri = "static:(tcp://127.0.0.1:{b_port})"\n'
        )
        a = stack.enter_context(running_broker(a_config, workdir / "a"))
        loadgen_wait(lambda: "bridge to broker B" in a.log_text())
        yield a.stomp_port, b.stomp_port


@contextmanager
def activemq_pair(workdir: Path) -> Iterator[tuple[int, int]]:
    b_port = free_port()
    with ExitStack() as stack:
        (workdir / "b").mkdir()
        (workdir / "a").mkdir()
        b = stack.enter_context(running_activemq(workdir / "b", b_port))
        connector = f'<networkConnector name="a-b" uri="static:(tcp://127.0.0.1:{b_port})"/>'
        a = stack.enter_context(running_activemq(workdir / "a", network_connectors=connector))
        yield a.stomp_port, b.stomp_port


def loadgen_wait(check: object, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError("the bridge did not start")
        time.sleep(0.05)


def forward(
    a_stomp: int, b_stomp: int, name: str, count: int, size: int, persistent: bool
) -> float:
    """Seconds from the first message reaching the consumer on B to its having all."""
    start = mp.Barrier(1)
    loadgen.produce(a_stomp, f"/queue/{name}", count, size, persistent, False, 0, start)
    result = loadgen.consume(b_stomp, [f"/queue/{name}"], count, mp.Event())
    return float(result.finished - result.first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    for persistent in (True, False):
        figures = {}
        for kind, pair in (("dovecote", dovecote_pair), ("activemq", activemq_pair)):
            with (
                tempfile.TemporaryDirectory(prefix=f"net-{kind}-") as tmp,
                pair(Path(tmp)) as (a, b),
            ):
                name = f"bench.forward.{'p' if persistent else 'np'}"
                seconds = forward(a, b, name, args.count, args.size, persistent)
                figures[kind] = args.count / seconds
        ratio = figures["dovecote"] / figures["activemq"]
        rows.append(
            f"| forward A->B, {'persistent' if persistent else 'non-persistent'}, "
            f"{args.count} x {args.size} B backlog | {figures['dovecote']:,.0f} msg/s | "
            f"{figures['activemq']:,.0f} msg/s | {ratio:.2f} |"
        )
    table = "\n".join(
        ["| network workload | dovecote | ActiveMQ 5.17 | ratio |", "|---|---|---|---|", *rows]
    )
    print(table)
    if args.out is not None:
        with args.out.open("a") as out:
            out.write("\n" + table + "\n")


if __name__ == "__main__":
    main()
