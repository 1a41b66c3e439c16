"""The client's OpenWire transport when its peer is gone under a send: the sender, not only
the reader thread, fails the transport, once, so that a failover connection reconnects and
the send is retried rather than the socket's error reaching the application (seen in the
failover test: a producer got ConnectionResetError when its send lost the race with the
reader noticing the killed broker). Real sockets: a socket pair whose other end is closed."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from dovecote.client.options import TransportOptions, WireFormatOptions
from dovecote.client.transport import ClientTransport, TransportClosedError
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t


@pytest.fixture
def orphaned() -> Iterator[tuple[ClientTransport, list[Exception]]]:
    """A transport whose socket's peer has closed (the reader thread is not running, as if
    it had not yet seen the close)."""
    failures: list[Exception] = []
    transport = ClientTransport(
        "127.0.0.1", 0, WireFormatOptions(), TransportOptions(), lambda s: None, failures.append
    )
    ours, theirs = socket.socketpair()
    theirs.close()
    transport._sock = ours
    try:
        yield transport, failures
    finally:
        ours.close()


def test_a_oneway_into_a_closed_peer_fails_the_transport_once(
    orphaned: tuple[ClientTransport, list[Exception]],
) -> None:
    transport, failures = orphaned
    with pytest.raises(TransportClosedError, match="while sending"):
        transport.oneway(Structure(t.KEEP_ALIVE_INFO))
    assert [type(f) for f in failures] == [BrokenPipeError]
    # Closed now: the next send says so without touching the socket, and nobody is told twice.
    with pytest.raises(TransportClosedError, match="is closed"):
        transport.oneway(Structure(t.KEEP_ALIVE_INFO))
    transport._fail(ConnectionResetError())  # the reader thread, late
    assert len(failures) == 1


def test_a_request_into_a_closed_peer_fails_it_and_every_waiting_request(
    orphaned: tuple[ClientTransport, list[Exception]],
) -> None:
    transport, failures = orphaned
    waiting: Future[Structure] = Future()
    transport._pending[999] = waiting  # another thread's request, sent before the close
    with pytest.raises(TransportClosedError):
        transport.request(Structure(t.KEEP_ALIVE_INFO), timeout=5)
    assert len(failures) == 1
    with pytest.raises(TransportClosedError):
        waiting.result(timeout=0)


def test_racing_failures_tell_the_connection_once(
    orphaned: tuple[ClientTransport, list[Exception]],
) -> None:
    transport, failures = orphaned
    start = threading.Barrier(8)

    def fail() -> None:
        start.wait()
        transport._fail(ConnectionResetError())

    threads = [threading.Thread(target=fail) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(failures) == 1
