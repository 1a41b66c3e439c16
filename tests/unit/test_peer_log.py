"""transport/peerlog.py: what peers get wrong is logged in a line each, within limits per
connection and for the process, with one summary of what was left out; a broker bug's
traceback is logged once per place it was raised."""

from __future__ import annotations

import asyncio
import logging

import pytest

from dovecote.transport.peerlog import ConnectionBudget, PeerLog

log = logging.getLogger("test.peerlog")


def test_lines_are_limited_per_connection_and_for_the_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    peer_log = PeerLog(per_connection=3, burst=10, per_second=0.001)
    with caplog.at_level(logging.INFO, logger="test.peerlog"):
        one = ConnectionBudget()
        for i in range(50):
            peer_log.peer(log, one, "bad frame %d", i, exc=ValueError("x"))
        assert len(caplog.records) == 3
        for _ in range(20):
            peer_log.peer(log, ConnectionBudget(), "bad frame")
        assert len(caplog.records) == 10  # the burst, then nothing
        peer_log.flush()
    assert caplog.records[-1].getMessage() == "60 more peer errors suppressed"
    assert not any(r.exc_info for r in caplog.records)  # tracebacks only at DEBUG


async def test_the_summary_comes_by_itself_once_the_window_has_passed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    peer_log = PeerLog(per_connection=1, burst=5, per_second=1000.0)
    with caplog.at_level(logging.INFO, logger="test.peerlog"):
        budget = ConnectionBudget()
        for _ in range(4):
            peer_log.peer(log, budget, "bad frame")
        for _ in range(100):
            if "3 more peer errors suppressed" in caplog.text:
                break
            await asyncio.sleep(0.05)
    assert "3 more peer errors suppressed" in caplog.text


def test_tracebacks_of_peer_errors_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="test.peerlog"):
        PeerLog().peer(log, ConnectionBudget(), "bad frame", exc=ValueError("x"))
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.DEBUG]
    assert caplog.records[1].exc_info is not None


def test_a_bug_logs_its_traceback_once_per_place(caplog: pytest.LogCaptureFixture) -> None:
    peer_log = PeerLog()

    def buggy() -> None:
        raise KeyError("oops")

    with caplog.at_level(logging.INFO, logger="test.peerlog"):
        for _ in range(5):
            try:
                buggy()
            except KeyError as exc:
                peer_log.bug(log, ConnectionBudget(), "running a command", exc)
    with_traceback = [r for r in caplog.records if r.exc_info]
    assert len(with_traceback) == 1
    assert len(caplog.records) == 5
    assert all("(logged before)" in r.getMessage() for r in caplog.records[1:])
