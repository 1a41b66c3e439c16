"""The benchmark's Markdown table: one row per figure, dovecote beside each peer (ActiveMQ
5.17, RabbitMQ 3.10), and its ratio against each peer and against the best of them, said so
that higher is always better for dovecote. A figure a peer cannot give is "n/a" with a
numbered footnote saying why."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

TITLES = {"dovecote": "dovecote", "activemq": "ActiveMQ 5.17", "rabbitmq": "RabbitMQ 3.10"}
PEERS = ("activemq", "rabbitmq")
"""The brokers dovecote is measured against, in the table's order."""


@dataclass
class Row:
    label: str
    values: Mapping[str, float | None]
    """Each broker's figure, by kind (dovecote's and any peer's that ran)."""
    higher_is_better: bool
    fmt: str
    pair_ratios: dict[str, list[float]] = field(default_factory=dict)
    """Per peer, the ratio of each pair of runs (run i against run i), when a workload ran
    more than once: how far one run's ratio strays from the median's, on this machine,
    this time."""
    missing: dict[str, str] = field(default_factory=dict)
    """Why a peer has no figure here ("n/a" in its cell, the reason in a footnote)."""
    remark: str = ""
    """Shown in the last column instead of a ratio (a target met or not)."""

    def better(self, dovecote: float, peer: float) -> float:
        return dovecote / peer if self.higher_is_better else peer / dovecote

    def ratio(self, peer: str) -> str:
        dovecote, other = self.values.get("dovecote"), self.values.get(peer)
        if not dovecote or not other:
            return "-"
        r = self.better(dovecote, other)
        pairs = self.pair_ratios.get(peer, [])
        if len(pairs) > 1:
            return f"{r:.2f}x ({min(pairs):.2f}-{max(pairs):.2f})"
        return f"{r:.2f}x"

    def best_peer(self) -> str | None:
        """The peer with the best figure on this row (None if no peer has one)."""
        figures = {p: v for p in PEERS if (v := self.values.get(p))}
        if not figures:
            return None
        pick = max if self.higher_is_better else min
        return pick(figures, key=lambda p: figures[p])

    def against_best(self, peers: tuple[str, ...]) -> str:
        if self.remark:
            return self.remark
        best = self.best_peer()
        if best is None or not self.values.get("dovecote"):
            return "-"
        shown = self.ratio(best).split(" (")[0]
        return f"{shown} ({TITLES[best].split()[0]})" if len(peers) > 1 else shown

    def cells(self, peers: tuple[str, ...], footnotes: list[str]) -> list[str]:
        """The row's cells for ``peers``; a missing figure's reason is added to
        ``footnotes`` (once) and its number shown."""
        shown = [self.label, self._figure("dovecote")]
        for peer in peers:
            reason = self.missing.get(peer)
            if reason is None:
                shown.append(self._figure(peer))
                continue
            if reason not in footnotes:
                footnotes.append(reason)
            shown.append(f"n/a [{footnotes.index(reason) + 1}]")
        shown += ["" if self.remark else self.ratio(peer) for peer in peers]
        shown.append(self.against_best(peers))
        return shown

    def _figure(self, kind: str) -> str:
        value = self.values.get(kind)
        return "-" if value is None else format(value, self.fmt)


def markdown(rows: list[Row], notes: list[str], command: str, peers: tuple[str, ...]) -> str:
    names = [TITLES[p] for p in peers]
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores ({platform.machine()}),"
        f" Python {platform.python_version()}, `{command}`. Ratio: how many times better"
        f" dovecote is than {' and than '.join(names)}, and than the best of"
        " them on the row (throughput dovecote/peer; latency, CPU, memory, time"
        " peer/dovecote); in brackets, the lowest and highest ratio of the runs taken in"
        " pairs (each workload's runs alternate between the brokers, all running).",
        "",
        "| Workload and figure | dovecote | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"vs {n.split()[0]}" for n in names)
        + " | vs best peer |",
        "|---|" + "---:|" * (2 * len(peers) + 2),
    ]
    footnotes: list[str] = []
    lines += ["| " + " | ".join(r.cells(peers, footnotes)) + " |" for r in rows]
    if footnotes:
        lines += ["", "n/a:"] + [f"- [{i}] {reason}" for i, reason in enumerate(footnotes, 1)]
    if notes:
        lines += ["", "Notes:"] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
