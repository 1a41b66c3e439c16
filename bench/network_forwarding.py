"""Forwarding through a network bridge (issue 30), rows of bench/harness.py: a dovecote pair
against an ActiveMQ 5.17 pair in the same run. Broker A has a network connector to broker
B; a backlog of N messages is sent to a queue on A while B has no consumer (nothing moves),
then a consumer on B subscribes and the time from its first message to its having all N is
measured: A's bridge subscribing on the consumer's advisory, and every message stored and
forwarded (persistent: stored by B before A removes its copy) or sent on
(non-persistent). The broker CPU is the pair's (A's and B's together).

    .venv/bin/python bench/network_forwarding.py [--repeat N]   # the harness's forwarding rows

Both pairs run on loopback with their default stores (dovecote's journal, KahaDB), syncing
before confirming a persistent send, both pairs running throughout and the runs taken in
turns as for the harness's other rows. The load is bench/loadgen.py's raw STOMP (a producer
process on A, a consumer process on B). RabbitMQ has no network connectors (its federation
and shovel plugins are other designs), so it has no figure on these rows.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import loadgen  # noqa: E402

from activemq import running_activemq  # noqa: E402
from brokers import running_broker  # noqa: E402
from ports import free_port  # noqa: E402

BRIDGE_TIMEOUT_S = 60.0
NO_NETWORK = (
    "RabbitMQ has no network connectors (its federation and shovel plugins are other designs)"
)


@dataclass
class Pair:
    a_pid: int
    b_pid: int
    a_stomp: int
    b_stomp: int
    a_openwire: int


@contextmanager
def dovecote_pair(workdir: Path) -> Iterator[Pair]:
    """A bridged to B, once a message has crossed."""
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
        wait_bridged(a.stomp_port, b.stomp_port)
        yield Pair(a.process.pid, b.process.pid, a.stomp_port, b.stomp_port, a.openwire_port)


@contextmanager
def activemq_pair(workdir: Path) -> Iterator[Pair]:
    """A bridged to B, once a message has crossed."""
    b_port = free_port()
    with ExitStack() as stack:
        (workdir / "b").mkdir()
        (workdir / "a").mkdir()
        b = stack.enter_context(running_activemq(workdir / "b", b_port))
        connector = f'<networkConnector name="a-b" uri="static:(tcp://127.0.0.1:{b_port})"/>'
        a = stack.enter_context(running_activemq(workdir / "a", network_connectors=connector))
        wait_bridged(a.stomp_port, b.stomp_port)
        yield Pair(a.process.pid, b.process.pid, a.stomp_port, b.stomp_port, a.openwire_port)


PAIRS: dict[str, Callable[[Path], AbstractContextManager[Pair]]] = {
    "dovecote": dovecote_pair,
    "activemq": activemq_pair,
}


def wait_bridged(a_stomp: int, b_stomp: int, timeout_s: float = BRIDGE_TIMEOUT_S) -> None:
    """Return once a message sent to A reaches a consumer on B: the bridge is up and
    forwards on demand (the same for both kinds of pair, whatever their logs say)."""
    name = "/queue/bench.bridge.ready"
    ready = threading.Event()
    got: list[loadgen.ConsumerResult] = []
    consumer = threading.Thread(
        target=lambda: got.append(
            loadgen.consume(b_stomp, [name], 1, ready, idle_timeout_s=timeout_s)
        )
    )
    consumer.start()
    ready.wait(timeout_s)
    loadgen.produce(a_stomp, name, 1, 16, False, False, 0, threading.Barrier(1))
    consumer.join(timeout_s + 5)
    if not got or got[0].received < 1:
        raise RuntimeError(f"the bridge forwarded nothing in {timeout_s:.0f} s")


def main() -> None:
    import harness

    sys.argv = [sys.argv[0], "--only", "forwarded A→B", *sys.argv[1:]]
    harness.main()


if __name__ == "__main__":
    main()
