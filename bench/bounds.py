"""What holds a row under the issue's 1.5x against the best peer, and what would close it:
a small table of known bounds, each taken from a measurement (docs/performance.md has the
runs behind them), said under the table for every row that falls short, with by how much.

A bound may hold only against one peer, or only when the run shows it: RabbitMQ confirms a
persistent message its consumer has taken without writing it, which the run's bytes
written per message show; the Java tools' own CPU leaves a ceiling the run works out. A row
short of the ratio with no known bound says so, so that the table is never silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from disk import UNSTORED_SHARE
from table import TITLES

UNSTORED = "unstored"
"""The best peer wrote under disk.UNSTORED_SHARE of dovecote's bytes per message."""
CLIENT = "client"
"""The load's own CPU caps the ratio below the target (harness.client_bound)."""


@dataclass(frozen=True)
class Bound:
    bound: str
    """What holds the row where it is, as measured."""
    closes: str
    """What would close the gap (or why nothing dovecote may do would)."""
    peer: str = ""
    """Only against this peer ("" any)."""
    when: str = ""
    """Only when the run shows this (UNSTORED, CLIENT; "" always)."""


@dataclass
class RunFacts:
    """What one workload's run shows beside its figures."""

    bytes_per_message: dict[str, float] = field(default_factory=dict)
    client_ceiling: float | None = None
    """The best ratio a broker costing nothing would reach, with the load's own CPU."""

    def shows(self, when: str, peer: str) -> bool:
        if not when:
            return True
        if when == UNSTORED:
            ours = self.bytes_per_message.get("dovecote", 0.0)
            theirs = self.bytes_per_message.get(peer)
            return ours > 0 and theirs is not None and theirs < UNSTORED_SHARE * ours
        if when == CLIENT:
            return self.client_ceiling is not None and self.client_ceiling < 1.5
        return False


_UNSTORED = Bound(
    "RabbitMQ 3.10 answers a persistent send once the message is stored or consumed, and"
    " with the harness's consumer running it stored next to nothing (bytes written per"
    " message, under the table), where dovecote and ActiveMQ 5.17 wrote and synced every"
    " message before its receipt; with nobody consuming, RabbitMQ wrote 5.7-7.3 KiB per"
    " message and was level with dovecote (the row 'nobody consuming')",
    "only answering before the fsync a message already consumed: ActiveMQ 5.17's own"
    " default for queues (KahaDB's concurrent store and dispatch: a queue's persistent"
    " message is dispatched while its write waits, and the write is dropped when the"
    " consumer acks first; the receipt then means stored or consumed), which dovecote"
    " does not do yet",
    peer="rabbitmq",
    when=UNSTORED,
)

KNOWN: dict[str, list[Bound]] = {
    "persistent sync send, 1 producer": [
        _UNSTORED,
        Bound(
            "each receipt waits for one fsync of a ~1.3 KB record, one send at a time, in"
            " both brokers; the rest of the round trip is three processes waking per send"
            " (producer, broker, consumer) on 2 cores and ~100 us of the broker's CPU"
            " (compiled), 41% of a fast disk's synced-append rate",
            "the fsync is the floor for a stored receipt; what is left is the broker's CPU"
            " per send and the wake-ups: dispatch concurrent with the fsync (ActiveMQ's"
            " concurrentStoreAndDispatch) would take the consumer off the critical path",
            peer="activemq",
        ),
    ],
    "persistent sync send, 1 producer, nobody consuming": [
        Bound(
            "one fsync per receipt, one send at a time, in every broker: the row is the"
            " disk's synced-append rate less the round trip (the disk's rate is in the"
            " note on the lone producer); measured side by side on a loaded machine,"
            " ActiveMQ made 425-550 msg/s writing 6.0 KB per message and dovecote 260-1,027"
            " writing 5.7 KB, with a third of ActiveMQ's CPU per message",
            "nothing on the broker's side beyond its CPU per send; a faster fsync",
        ),
    ],
    "persistent sync send, 8 producers": [
        _UNSTORED,
        Bound(
            "group commit shares one fsync among the producers waiting at that moment"
            " (~4.8 per fsync measured), so the row is the disk's rate times the group size",
            "larger groups: the producers' receipts go out together, the next sends arrive"
            " a moment apart",
            peer="activemq",
        ),
    ],
    "100 KiB persistent messages": [
        _UNSTORED,
        Bound(
            "the bytes: both brokers write each 100 KiB body once (MB/s written, under the"
            " table), neither syncs a send nobody waits for",
            "writing the body straight from the socket's buffers (one copy fewer)",
            peer="activemq",
        ),
    ],
    "OpenWire, ActiveMQ's tools": [
        Bound(
            "the two JVMs of ActiveMQ's tools: their own CPU leaves a broker costing"
            " nothing at most the ceiling worked out under the table",
            "nothing in the broker: a lighter load (the raw OpenWire row measures that)",
            when=CLIENT,
        ),
        Bound(
            "the two JVMs of ActiveMQ's tools more than the broker: their own CPU per"
            " message (the row under it) is several times the broker's, and ActiveMQ's own"
            " encoding (tight, cached) measured no lighter for them than dovecote's",
            "nothing in the broker: a lighter load (the raw OpenWire row measures that)",
            peer="activemq",
        ),
    ],
    "forwarded A→B by a network connector, persistent backlog": [
        Bound(
            "the machine's load, first: the bridge sends runs of up to 100 with one answer"
            " each and acks its copies in batches, and its pair led ActiveMQ's 1.72-3.28x"
            " in loaded runs (docs/networks.md)",
            "a quiet run",
        ),
    ],
    "forwarded A→B by a network connector, non-persistent backlog": [
        Bound(
            "the forwarding broker's encoding of each forwarded send (about half its time"
            " per message); each run lasts under a second, so load moves it most"
            " (0.57-1.12x in loaded runs, docs/networks.md)",
            "a direct frame writer for forwarded sends, as dispatches have",
        ),
    ],
}
QUIET = {
    "non-persistent queue 1→1": "3.49x (short) and 2.04x (full) against ActiveMQ 5.17",
    "non-persistent queue 4→4": "2.11x (short) and 1.92x (full) against ActiveMQ 5.17",
    "persistent async send": "2.87x (short) and 3.19x (full) against ActiveMQ 5.17",
    "topic fan-out 1→8 (deliveries)": "1.75x (short) and 2.25x (full) against ActiveMQ 5.17",
    "OpenWire, raw pipelined load, non-persistent 1→1": "2.12x (short) and 2.11x (full)",
}
"""Rows that met the ratio against ActiveMQ on a quiet machine: short of it, the first
thing that bounds them is the machine's load (the load generator and the brokers share 2
cores)."""


IDLE = Bound(
    "the runtime and the libraries the broker cannot start without: Python with asyncio and"
    " uvloop alone takes the row 'the runtime alone' (21.5 MiB here), and with msgspec (the"
    " configuration, with typing_extensions, datetime, decimal and uuid), LMDB, msgpack,"
    " zlib-ng, pathlib, argparse and tomllib 25.4 MiB (bench/runtimes.py), a quarter of the"
    " smallest peer already, before any of dovecote's code; over that floor, dovecote's own"
    " modules take ~8.5 MiB compiled: the mypyc library's pages (~3.6 MiB resident: its code"
    " runs at import, spread over the whole library) and the modules' objects (types,"
    " functions, constants: ~4.7 MiB of the allocator's); what only some brokers need loads"
    " when they do (each protocol at its listener's first connection, network bridges, the"
    " admin API, other stores, JSON, the scheduler: tests/integration/"
    "test_idle_broker_imports.py; measured 2026-11-26)",
    "nothing dovecote can do on CPython with these libraries: the floor alone is at the"
    " target; an interpreter, or libraries, taking less",
)


def explain(
    name: str, ratio: float, best: str, target: float, facts: RunFacts | None = None
) -> str:
    """One row short of ``target`` against the ``best`` peer: by how much, what bounds it,
    what would close it."""
    facts = facts or RunFacts()
    said = f"{name} {ratio:.2f}x ({TITLES[best]}), {target / ratio:.2f}x short of {target}x"
    for b in KNOWN.get(name, []):
        if (not b.peer or b.peer == best) and facts.shows(b.when, best):
            return f"{said}; bound: {b.bound}; would close it: {b.closes}"
    if name in QUIET:
        return (
            f"{said}; bound: the machine's cores, which the load's processes share with the"
            f" brokers: on a quiet machine this row was at {QUIET[name]} (docs/performance.md);"
            " would close it: a run on a quiet machine (a loaded one compresses the ratios)"
        )
    return f"{said}; bound: not yet known (no measurement explains this row)"
