"""Local Spark sessions for the Spark tests: this interpreter for Spark's Python workers (the
one with pyarrow and dovecote), no UI, two shuffle partitions, and the dovecote source."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Spark's Python workers must run this interpreter; otherwise they start the machine's python3.
os.environ["PYSPARK_PYTHON"] = sys.executable


def local_session(app: str, master: str = "local[2]") -> Any:
    from pyspark.sql import SparkSession

    from dovecote.spark import register

    session = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    register(session)
    return session


@contextmanager
def local_spark(app: str, master: str = "local[2]") -> Iterator[Any]:
    session = local_session(app, master)
    try:
        yield session
    finally:
        session.stop()
