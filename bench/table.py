"""The benchmark's Markdown table: one row per figure, dovecote beside ActiveMQ, and the ratio
said so that higher is always better for dovecote."""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field


@dataclass
class Row:
    label: str
    dovecote: float | None
    activemq: float | None
    higher_is_better: bool
    fmt: str
    pair_ratios: list[float] = field(default_factory=list)
    """The ratio of each pair of runs (run i against run i), when a workload ran more than
    once: how far one run's ratio strays from the median's, on this machine, this time."""

    def ratio(self) -> str:
        if not self.dovecote or not self.activemq:
            return "-"
        r = self.better(self.dovecote, self.activemq)
        if len(self.pair_ratios) > 1:
            return f"{r:.2f}x ({min(self.pair_ratios):.2f}-{max(self.pair_ratios):.2f})"
        return f"{r:.2f}x"

    def better(self, dovecote: float, activemq: float) -> float:
        return dovecote / activemq if self.higher_is_better else activemq / dovecote

    def cells(self) -> list[str]:
        show = [("-" if v is None else format(v, self.fmt)) for v in (self.dovecote, self.activemq)]
        return [self.label, *show, self.ratio()]


def markdown(rows: list[Row], notes: list[str], command: str) -> str:
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores ({platform.machine()}),"
        f" Python {platform.python_version()}, `{command}`. Ratio: how many times better"
        " dovecote is (throughput dovecote/ActiveMQ; latency, CPU, memory, time"
        " ActiveMQ/dovecote); in brackets, the lowest and highest ratio of the runs taken in"
        " pairs (each workload's runs alternate between the two brokers, both running).",
        "",
        "| Workload and figure | dovecote | ActiveMQ 5.17 | ratio |",
        "|---|---:|---:|---:|",
    ]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    if notes:
        lines += ["", "Notes:"] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
