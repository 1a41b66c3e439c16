"""examples/pipeline.py runs as the README says (compatibility X2): orders in, per-window totals in
Parquet, alerts on the topic, exactly the windows the watermark closed, each once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from brokers import running_broker
from dovecote.client import ConnectionFactory
from dovecote.core.destinations import topic

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "pipeline.py"


@pytest.mark.timeout(300)
def test_pipeline_example(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with ConnectionFactory(url).create_connection() as connection:
            connection.start()
            alerts = connection.create_session().create_consumer(topic("alerts"))
            result = subprocess.run(
                [sys.executable, str(EXAMPLE), "--broker", url, "--orders", "300", "--once",
                 "--out", str(out), "--alert-over", "700"],
                capture_output=True, text=True, timeout=280, check=False,
                env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
            )  # fmt: skip
            assert result.returncode == 0, result.stdout + result.stderr[-3000:]
            summary = re.search(r"windows written: (\d+); alerts sent: (\d+)", result.stdout)
            assert summary is not None, result.stdout
            received = []
            while (message := alerts.receive(2)) is not None:
                received.append(json.loads(str(message.body)))
    rows = pq.read_table(out / "windows").to_pylist()
    assert len(rows) == int(summary[1]) > 0
    keys = [(r["window_start"], r["customer"]) for r in rows]
    assert len(keys) == len(set(keys))  # each window and customer once
    # 300 orders one second apart: the closed 10 s windows hold all but the last few.
    assert 250 <= sum(r["orders"] for r in rows) <= 300
    over = sorted(r["total"] for r in rows if r["total"] > 700)
    assert len(received) == int(summary[2]) == len(over) > 0
    assert sorted(a["total"] for a in received) == over
