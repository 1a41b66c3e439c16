"""Local Spark sessions for the Spark tests: this interpreter for Spark's Python workers (the
one with pyarrow and dovecote), no UI, two shuffle partitions, and the dovecote source; one
session shared by the test modules in this process."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from typing import Any

# Spark's Python workers must run this interpreter; otherwise they start the machine's python3.
os.environ["PYSPARK_PYTHON"] = sys.executable

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""For the short-lived JVMs of tests: the quick JIT compiler only and one GC thread (on a
loaded two-core machine a session started and ran a small job in about half the time)."""


def local_session(app: str, master: str = "local[2]") -> Any:
    from pyspark.sql import SparkSession

    from dovecote.spark import register

    session = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .getOrCreate()
    )
    register(session)
    return session


_shared: list[Any] = []


def shared_session() -> Any:
    """The one local session of the test modules that need one, started at the first use
    and left running until the tests end (a session costs a JVM's start): local[2,2], two
    cores, and a failed task is tried once more."""
    if not _shared:
        session = local_session("dovecote-tests", "local[2,2]")
        _shared.append(session)
        atexit.register(_stop, session)
    return _shared[0]


def _stop(session: Any) -> None:
    with contextlib.suppress(Exception):  # (the JVM also ends when this process does)
        session.stop()
