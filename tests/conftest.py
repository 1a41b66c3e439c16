from __future__ import annotations

import faulthandler
import os
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from activemq import running_activemq
from brokers import BrokerProcess, running_broker
from differ import FLAG_POLICY, FLAG_POLICY_XML, Peers
from stompclient import Client

# Destination policies the conformance suite relies on: individual DLQs for "indiv.>" queues,
# a quick expiry sweep, 1 MiB frames, 200 ms heart-beats, a low broker-side redelivery
# limit for "short.>" queues, and a pending limit on topics (ActiveMQ's distribution sets
# one; a subscriber's own lower limit takes effect only where one is set).
CONFORMANCE_CONFIG = """
[stomp]
max_frame_size = 1048576
heartbeat_ms = [200, 200]

[policy]
expire_messages_period_ms = 200

[[policy.entries]]
pattern = "indiv.>"
dead_letter = "individual"

[[policy.entries]]
pattern = "short.>"
maximum_redeliveries = 2

[[policy.entries]]
pattern = ">"
queues = false
pending_message_limit = 1000
"""


# pytest-timeout's signal interrupts a test once; a test stuck after it (a thread its event
# loop waits for) would hold the run until CI's own limit, saying nothing. This ends the run
# with every thread's stack instead, two minutes past the test's timeout. Not faulthandler's
# own timer: pytest cancels that as soon as a test fails.
WATCHDOG_GRACE_S = 120


def _end_the_run(config: pytest.Config, nodeid: str, after: float) -> None:
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=False)
    sys.stderr.write(f"\nwatchdog: {nodeid} still running {after:.0f} s on; ending the run\n")
    sys.stderr.flush()
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    os._exit(1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    marker = item.get_closest_marker("timeout")
    limit = marker.args[0] if marker and marker.args else item.config.getini("timeout")
    watchdog = None
    if limit:
        after = float(limit) + WATCHDOG_GRACE_S
        watchdog = threading.Timer(after, _end_the_run, (item.config, item.nodeid, after))
        watchdog.daemon = True
        watchdog.start()
    try:
        yield
    finally:
        if watchdog is not None:
            watchdog.cancel()


@pytest.fixture(scope="session")
def broker() -> Iterator[BrokerProcess]:
    with running_broker(CONFORMANCE_CONFIG) as proc:
        yield proc


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A destination name no other test uses."""
    return f"{request.node.name.replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def connect(broker: BrokerProcess) -> Iterator[Callable[..., Client]]:
    """Open STOMP clients against the shared broker; all are closed after the test."""
    clients: list[Client] = []

    def make(**kwargs: object) -> Client:
        client = Client(broker.stomp_address, **kwargs)  # type: ignore[arg-type]
        clients.append(client)
        return client

    mark = len(broker.log_lines)
    yield make
    for client in clients:
        client.close()
    # Shown by pytest only when the test failed: what the broker logged meanwhile.
    print("".join(broker.log_lines[mark:]))


@pytest.fixture
def log_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The journal's data files (db-N.log) fsynced from now on, by path, in order: os.fsync
    is wrapped for the test (the real one still runs; a directory's fsync is not listed)."""
    synced: list[str] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.endswith(".log"):
            synced.append(path)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    return synced


# The pair of brokers the differential suite and the client suites share, started once for
# the whole run. ActiveMQ as every suite configures it (priority-ordered queues,
# ``prioritizedMessages``, dovecote's only ordering: a difference of defaults on purpose,
# compatibility C8; the statistics plugin); dovecote as the ActiveMQ beside it: the pending limit on
# topics that ActiveMQ's distribution sets (a subscriber's own limit needs one), and the
# scheduler on in both (compatibility D5). Both also flag advisories on flag.> and flagd.>
# (FLAG_POLICY: one pair of brokers fewer to start).
PEER_CONFIG = f"""
[broker]
scheduler_support = true
{FLAG_POLICY}

[[policy.entries]]
pattern = ">"
queues = false
pending_message_limit = 1000
"""


@pytest.fixture(scope="session")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peers]:
    with (
        running_activemq(
            scheduler_support=True, topic_pending_limit=1000, policy_entries=FLAG_POLICY_XML
        ) as amq,
        running_broker(PEER_CONFIG, workdir=tmp_path_factory.mktemp("peers")) as ours,
    ):
        yield Peers((ours.openwire_port, ours.stomp_port), (amq.openwire_port, amq.stomp_port))
