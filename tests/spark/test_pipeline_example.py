"""examples/pipeline.py as the README runs it (SPEC X2): alone, with its embedded broker, on
local Spark; and with spark-submit on a standalone Spark cluster (a master and a worker on
loopback, started from PySpark's own distribution) against a broker process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ports import free_port

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "examples" / "pipeline.py"
ALERT_OVER = 800.0


def pipeline_env() -> dict[str, str]:
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONUNBUFFERED="1")


def written_windows(out: Path) -> list[dict[str, object]]:
    """Every window row the pipeline wrote (each batch's Parquet directory)."""
    rows: list[dict[str, object]] = []
    for batch in sorted((out / "windows").glob("batch=*")):
        for part in batch.glob("*.parquet"):
            rows.extend(pq.read_table(part).to_pylist())
    return rows


def check_output(output: str, out: Path, orders: int) -> int:
    """The summary line agrees with the Parquet output; returns the number of alerts."""
    summary = re.search(r"windows written: (\d+); alerts sent: (\d+)", output)
    assert summary, output[-3000:]
    windows = written_windows(out)
    assert len(windows) == int(summary[1]) > 0
    # Windows the watermark has closed: at most every order, most of them.
    counted = sum(int(str(w["orders"])) for w in windows)
    assert orders // 2 < counted <= orders
    over = [w for w in windows if float(str(w["total"])) > ALERT_OVER]
    assert int(summary[2]) == len(over) > 0
    return len(over)


@pytest.mark.timeout(300)
def test_the_example_runs_alone_with_its_embedded_broker(tmp_path: Path) -> None:
    """Nothing is listening at --broker: the example starts its own broker and completes."""
    url = f"tcp://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, str(PIPELINE), "--orders", "400", "--once", "--broker", url,
         "--out", str(tmp_path / "out"), "--master", "local[2]"],
        cwd=tmp_path, env=pipeline_env(), capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert f"embedded dovecote broker at {url}" in output
    check_output(output, tmp_path / "out", 400)
