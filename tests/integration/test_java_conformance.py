"""The Java conformance suite (tests/java/Conformance.java), compiled with javac against
Debian's ActiveMQ 5.17 client jars, run with the unmodified Java client against dovecote and
against a real ActiveMQ 5.17: the same scenarios must pass on both (the second run proves
the suite right)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activemq import classpath, java_classes, running_activemq
from brokers import running_broker

SCENARIOS = [
    "text_message", "bytes_message", "map_message", "stream_message", "object_message",
    "sync_and_async_send", "listener", "listener_and_receive_mixed", "auto_ack_each_of_many",
    "client_acknowledge",
    "individual_acknowledge", "dups_ok_acknowledge", "optimize_acknowledge",
    "prefetch_zero_receive_timeout", "transaction_commit_rollback",
    "redelivery_exhaustion_to_dlq", "selectors", "durable_subscriber_reconnect",
    "temp_queue_request_reply", "priority", "expiry", "queue_browser", "producer_window",
    "invalid_selector_error", "duplicate_client_id_error",
]  # fmt: skip


@pytest.fixture(scope="module")
def compiled() -> Path:
    return java_classes()


def run_suite(classes: Path, port: int) -> dict[str, str]:
    result = subprocess.run(
        ["java", "-cp", f"{classpath()}:{classes}", "Conformance", str(port),
         f"run{uuid.uuid4().hex[:8]}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    outcomes: dict[str, str] = {}
    for line in result.stdout.splitlines():
        verdict, _, rest = line.partition(" ")
        if verdict in ("PASS", "FAIL"):
            name, _, reason = rest.partition(": ")
            outcomes[name] = "PASS" if verdict == "PASS" else f"FAIL {reason}"
    if not outcomes:
        raise AssertionError(f"the Java suite printed nothing:\n{result.stdout}\n{result.stderr}")
    return outcomes


@pytest.fixture(scope="module")
def dovecote_results(
    compiled: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    # As the ActiveMQ fixture configures it: a 64 KiB limit, every message in memory.
    config = (
        '[[policy.entries]]\npattern = "*.window"\nmemory_limit = 65536\n'
        'pending_queue_cursor = "vm"\n'
    )
    with running_broker(config, workdir=tmp_path_factory.mktemp("dovecote")) as broker:
        yield run_suite(compiled, broker.openwire_port)


@pytest.fixture(scope="module")
def activemq_results(compiled: Path) -> Iterator[dict[str, str]]:
    with running_activemq() as amq:
        yield run_suite(compiled, amq.openwire_port)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_client_against_dovecote(dovecote_results: dict[str, str], scenario: str) -> None:
    assert dovecote_results.get(scenario) == "PASS", dovecote_results.get(scenario)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_client_against_activemq(activemq_results: dict[str, str], scenario: str) -> None:
    assert activemq_results.get(scenario) == "PASS", activemq_results.get(scenario)
