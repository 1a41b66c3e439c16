"""Broker start time: from process start to the ready line (the STOMP port is open).

Run: .venv/bin/python bench/startup.py [runs]. Prints each run and the median; the goal
(issue: under 1 s once installed) is checked by reading the figure, not by a test.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def one_start() -> float:
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dovecote", "broker", "--stomp-port", "0", "--openwire-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("dovecote ready"):
            raise RuntimeError(f"broker did not start: {line!r}")
        return time.monotonic() - started
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    times = [one_start() for _ in range(runs)]
    for t in times:
        print(f"start: {t * 1000:.0f} ms")
    print(f"median start: {statistics.median(times) * 1000:.0f} ms over {runs} runs")


if __name__ == "__main__":
    main()
