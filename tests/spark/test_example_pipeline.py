"""examples/pipeline.py as the README runs it (compatibility X2): alone, with its embedded broker,
on local Spark; and with spark-submit on a standalone Spark cluster (a master and a worker on
loopback, started from PySpark's own distribution) against a broker process, where a
subscriber gets the alerts. Orders in, per-window totals in Parquet (exactly the windows the
watermark closed, each window and customer once), an alert on the topic per window over the
threshold."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest

from brokers import running_broker
from dovecote.client import ConnectionFactory, Message
from dovecote.core.destinations import topic
from ports import free_port
from spark.sessions import JVM_OPTIONS

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "examples" / "pipeline.py"
ALERT_OVER = 800.0


def pipeline_env() -> dict[str, str]:
    # Every JVM of the run (driver, master, worker, executor) with the tests' JVM options.
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONUNBUFFERED="1",
                JAVA_TOOL_OPTIONS=JVM_OPTIONS)  # fmt: skip


def written_windows(out: Path) -> list[dict[str, object]]:
    """Every window row the pipeline wrote (each batch's Parquet directory)."""
    rows: list[dict[str, object]] = []
    for batch in sorted((out / "windows").glob("batch=*")):
        for part in batch.glob("*.parquet"):
            rows.extend(pq.read_table(part).to_pylist())
    return rows


def check_output(output: str, out: Path, orders: int) -> list[float]:
    """The summary line agrees with the Parquet output, which holds each window and
    customer once; returns the totals over the alert threshold, in order."""
    summary = re.search(r"windows written: (\d+); alerts sent: (\d+)", output)
    assert summary, output[-3000:]
    windows = written_windows(out)
    assert len(windows) == int(summary[1]) > 0
    keys = [(w["window_start"], w["customer"]) for w in windows]
    assert len(keys) == len(set(keys))
    # Orders one second apart: the windows the watermark has closed (10 s windows, 5 s late)
    # hold all but the last few.
    counted = sum(int(str(w["orders"])) for w in windows)
    assert orders - 20 <= counted <= orders
    over = sorted(float(str(w["total"])) for w in windows if float(str(w["total"])) > ALERT_OVER)
    assert int(summary[2]) == len(over) > 0
    return over


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


SPARK_HOME = Path(pyspark.__file__).parent
LONG = bool(os.environ.get("DOVECOTE_LONG"))


class SparkProcess:
    """A standalone master or worker, its output in a file; stopped by its process id."""

    def __init__(self, log: Path, *args: str) -> None:
        self.log = log
        self.process = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=log.open("wb"), stderr=subprocess.STDOUT,
            env=dict(pipeline_env(), SPARK_HOME=str(SPARK_HOME)),
        )  # fmt: skip

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as reply:
            return int(json.load(reply).get("aliveworkers", 0))
    except OSError:
        return 0


@contextmanager
def standalone_cluster(workdir: Path, workers: int) -> Iterator[str]:
    """A master and ``workers`` workers on loopback; yields the master's URL. Everything
    started is stopped, also when starting fails."""
    port, ui_port = free_port(), free_port()
    started: list[SparkProcess] = []
    try:
        started.append(SparkProcess(
            workdir / "master.log", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)))  # fmt: skip
        master = f"spark://127.0.0.1:{port}"
        for n in range(workers):
            started.append(SparkProcess(
                workdir / f"worker-{n}.log", "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--port", str(free_port()),
                "--webui-port", str(free_port()), "--cores", "2", "--memory", "1g",
                "--work-dir", str(workdir / f"work-{n}"), master))  # fmt: skip
        deadline = time.monotonic() + 90
        while alive_workers(ui_port) < workers:
            for process in started:
                if process.process.poll() is not None:
                    raise AssertionError(f"{process.log.name} ended:\n{process.log.read_text()}")
            if time.monotonic() > deadline:
                raise AssertionError("the Spark workers did not register with the master")
            time.sleep(0.5)
        yield master
    finally:
        for process in reversed(started):
            process.stop()


def collect_alerts(url: str, into: list[Message], stop: threading.Event) -> threading.Thread:
    """A subscriber to topic://alerts, subscribed before the thread is returned."""
    connection = ConnectionFactory(url).create_connection()
    connection.start()
    consumer = connection.create_session().create_consumer(topic("alerts"))

    def run() -> None:
        with connection:
            while not stop.is_set():
                message = consumer.receive(0.5)
                if message is not None:
                    into.append(message)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def run_on_a_cluster(tmp_path: Path, orders: int, workers: int) -> None:
    alerts: list[Message] = []
    stop = threading.Event()
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        listener = collect_alerts(url, alerts, stop)
        try:
            with standalone_cluster(tmp_path, workers) as master:
                done = subprocess.run(
                    [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master,
                     "--conf", "spark.ui.enabled=false", str(PIPELINE), "--broker", url,
                     "--orders", str(orders), "--once", "--out", str(tmp_path / "out")],
                    cwd=tmp_path, capture_output=True, text=True, timeout=400,
                    env=dict(pipeline_env(), SPARK_HOME=str(SPARK_HOME)),
                )  # fmt: skip
            output = done.stdout + done.stderr
            assert done.returncode == 0, output[-4000:]
            assert "embedded dovecote broker" not in output
            over = check_output(output, tmp_path / "out", orders)
        finally:
            stop.set()
            listener.join(10)
    # The alerts reached a subscriber: one per window over the threshold, with its total (a
    # batch run again sends its alerts again with the same correlation id).
    unique = {m.correlation_id: json.loads(str(m.body))["total"] for m in alerts}
    assert sorted(unique.values()) == over


@pytest.mark.timeout(480)
def test_the_example_on_a_standalone_spark_cluster(tmp_path: Path) -> None:
    """spark-submit --master spark://127.0.0.1:PORT, a master and a worker started from
    PySpark's own distribution, against a broker process."""
    run_on_a_cluster(tmp_path, orders=300, workers=1)


@pytest.mark.slow
@pytest.mark.skipif(not LONG, reason="long form: DOVECOTE_LONG=1")
@pytest.mark.timeout(900)
def test_the_example_on_a_standalone_cluster_of_two_workers(tmp_path: Path) -> None:
    run_on_a_cluster(tmp_path, orders=5000, workers=2)
