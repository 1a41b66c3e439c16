"""Persistent STOMP sends without a receipt are pipelined (their store writes overlap and
share fsyncs): they still keep their order, a later RECEIPT still means every send before it
is stored, and a bad one still ends the connection with an ERROR."""

from __future__ import annotations

from pathlib import Path

from brokers import running_broker
from stompclient import Client


def test_order_and_durability_survive_kill_9(tmp_path: Path) -> None:
    with running_broker(workdir=tmp_path) as broker:
        with Client(broker.stomp_address) as client:
            for i in range(500):
                client.send("/queue/piped", f"m{i}", receipt=False, persistent="true")
            client.send("/queue/piped", "last", receipt=True, persistent="true")
        broker.process.kill()  # the receipt promised all 501 are on disk
        broker.process.wait()
    with running_broker(workdir=tmp_path) as broker, Client(broker.stomp_address) as client:
        client.subscribe("/queue/piped")
        bodies = [m.body for m in client.receive_n(501)]
        assert bodies == [f"m{i}" for i in range(500)] + ["last"]


def test_a_refused_pipelined_send_ends_the_connection_with_an_error(tmp_path: Path) -> None:
    config = (
        "[usage]\nmemory_limit = 65536\nsend_fail_if_no_space = true\n"
        '[[policy.entries]]\npending_queue_cursor = "vm"\n'
    )
    with running_broker(config, workdir=tmp_path) as broker:
        with Client(broker.stomp_address) as client:
            for _ in range(40):  # 40 x 4 KiB: past the 64 KiB memory limit
                client.send("/queue/full", "x" * 4096, receipt=False, persistent="true")
            error = client.listener.errors.get(timeout=10)
            assert "limit" in error.headers["message"]
        with Client(broker.stomp_address) as other:
            other.subscribe("/queue/full")
            kept = other.receive_n(10)  # the sends before the refused one are all there
            assert {m.body for m in kept} == {"x" * 4096}
