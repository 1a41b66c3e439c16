"""Issue 33's targets, said beside the figures they concern, from the same run: the lone
synchronous producer against the disk's rate of synced appends, idle RSS against the
smallest peer's, and every throughput row against the best peer."""

from __future__ import annotations

from bounds import IDLE, RunFacts, explain
from disk import APPEND_BYTES
from table import PEERS, TITLES, Row

SYNC_SEND_CEILING = 2_500.0
"""msg/s: the lone synchronous producer's target, unless the disk holds it lower ..."""
SYNC_SEND_SHARE = 0.7
"""... to this share of the disk's synced appends per second."""
IDLE_SHARE = 0.25
"""dovecote's idle RSS: at most this share of the smallest peer's."""
BEST_PEER_RATIO = 1.5
"""Every throughput row: at least this many times the best peer's."""


def sync_send_target(appends_per_s: float) -> float:
    return min(SYNC_SEND_CEILING, SYNC_SEND_SHARE * appends_per_s)


def _met(rate: float, target: float) -> str:
    return "met" if rate >= target else f"{1 - rate / target:.0%} short"


def sync_send_row(name: str, rate: float, target: float, appends_per_s: float) -> Row:
    """The target as a row under the lone producer's msg/s (dovecote's column)."""
    return Row(
        f"{name}: target msg/s, min({SYNC_SEND_CEILING:,.0f}, {SYNC_SEND_SHARE:.0%} of the"
        f" disk's {appends_per_s:,.0f} synced {APPEND_BYTES:,} B appends/s)",
        {"dovecote": target},
        True,
        ",.0f",
        remark=f"dovecote at {rate / target:.2f} of it: {_met(rate, target)}",
    )


def sync_send_note(name: str, rate: float, target: float, appends_per_s: float) -> str:
    return (
        f"{name}: the disk took {appends_per_s:,.0f} synced appends of {APPEND_BYTES:,} B"
        f" per second alone in this run (bench/disk.py: a write and an fsync each, nothing"
        f" else); the issue's target is min({SYNC_SEND_CEILING:,.0f} msg/s,"
        f" {SYNC_SEND_SHARE:.0%} of that) = {target:,.0f} msg/s; dovecote made"
        f" {rate:,.0f} msg/s: {_met(rate, target)}"
    )


def idle_note(idle_mib: dict[str, float], alone_mib: dict[str, float]) -> str:
    """dovecote's idle RSS against a quarter of the smallest peer's, and what each runtime
    alone takes of its broker's."""
    peers = {p: idle_mib[p] for p in PEERS if p in idle_mib}
    dovecote = idle_mib["dovecote"]
    if not peers:
        return f"idle RSS: dovecote {dovecote:.1f} MiB, no peer ran"
    smallest = min(peers, key=lambda p: peers[p])
    limit = peers[smallest] * IDLE_SHARE
    verdict = (
        "met"
        if dovecote <= limit
        else f"not met, {dovecote - limit:.1f} MiB over; bound: {IDLE.bound}; would close it:"
        f" {IDLE.closes}"
    )
    said = (
        f"idle RSS: the issue's target is at most {IDLE_SHARE:.0%} of the smallest peer's"
        f" ({TITLES[smallest]}'s {peers[smallest]:.1f} MiB), {limit:.1f} MiB; dovecote's is"
        f" {dovecote:.1f}: {verdict}"
    )
    if "dovecote" in alone_mib:
        runtimes = [
            f"{name} alone {alone_mib[k]:.1f} of {TITLES[k]}'s {idle_mib[k]:.1f}"
            for k, name in (("activemq", "the JVM"), ("rabbitmq", "the Erlang VM"))
            if k in alone_mib and k in idle_mib
        ]
        said += (
            f". The interpreter with its event loop alone takes {alone_mib['dovecote']:.1f}"
            f" MiB of dovecote's {dovecote:.1f}" + (f" ({'; '.join(runtimes)})" if runtimes else "")
        )
    return said


def below_best(rows: list[Row], facts: dict[str, RunFacts] | None = None) -> list[str]:
    """The throughput rows under the issue's ratio against the best peer, one note each: by
    how much, what bounds it and what would close it (bench/bounds.py), with what the run
    showed of each workload (``facts``, by workload name)."""
    short = []
    for row in rows:
        best, dovecote = row.best_peer(), row.values.get("dovecote")
        if not row.label.endswith(": msg/s") or best is None or not dovecote:
            continue
        peer_value = row.values[best]
        assert peer_value is not None
        ratio = row.better(dovecote, peer_value)
        if ratio < BEST_PEER_RATIO:
            name = row.label.removesuffix(": msg/s")
            said = explain(name, ratio, best, BEST_PEER_RATIO, (facts or {}).get(name))
            short.append(f"under the issue's {BEST_PEER_RATIO}x against the best peer: {said}")
    if not short:
        return [f"every throughput row is at least {BEST_PEER_RATIO}x the best peer's"]
    return short
