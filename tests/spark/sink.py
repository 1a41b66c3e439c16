"""Reading what a Spark Parquet sink has committed, without Spark: the files its
_spark_metadata log lists (files of a batch that a killed driver never committed are in the
directory but not in the log)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq


def _batch_logs(sink: Path) -> list[Path]:
    """The log files that together list every committed file: the latest compaction
    (``N.compact`` holds batches 0..N) and the batches after it."""
    log = sink / "_spark_metadata"
    if not log.is_dir():
        return []
    entries = [p for p in log.iterdir() if not p.name.startswith(".") and "tmp" not in p.name]
    entries.sort(key=lambda p: int(p.name.split(".")[0]))
    compacts = [p for p in entries if p.name.endswith(".compact")]
    if not compacts:
        return entries
    last = int(compacts[-1].name.split(".")[0])
    return [compacts[-1]] + [p for p in entries if int(p.name.split(".")[0]) > last]


def committed_files(sink: Path) -> list[str]:
    files: list[str] = []
    for entry in _batch_logs(sink):
        for line in entry.read_text().splitlines()[1:]:
            if line.strip():
                files.append(json.loads(line)["path"])
    return files


def committed_rows(sink: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in committed_files(sink):
        table = pq.read_table(path.removeprefix("file://"))
        for row in table.to_pylist():
            row["_file"] = path
            rows.append(row)
    return rows


def committed_batches(sink: Path) -> int:
    logs = _batch_logs(sink)
    return int(logs[-1].name.split(".")[0]) + 1 if logs else 0
