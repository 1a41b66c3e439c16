"""A broker started idle has not loaded its protocols (each listener imports its
connection's module at its first accepted connection: transport/servers.py, issue 33): the
first connection of each protocol, on its own port and on the auto port, is served in full
by a broker nobody has spoken to before (the idle import test checks that those modules
were not loaded)."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from brokers import running_broker
from dovecote.protocol.openwire import FrameReader, Marshaller, Structure
from dovecote.protocol.openwire import schema as t
from rawopenwire import Peer, client_wfi, ids

AUTO = "[auto]\nenabled = true\nport = 0\n"


def stomp_connected(port: int) -> bytes:
    """CONNECT on a fresh socket: the broker's first frame back."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00")
        data = b""
        while b"\x00" not in data:
            chunk = sock.recv(4096)
            assert chunk, f"closed after {data!r}"
            data += chunk
        return data


def openwire_answers_first_speaker(port: int) -> list[int]:
    """An OpenWire client that speaks first (the auto port waits for its first byte): the
    types of what the broker answers to its WireFormatInfo and ConnectionInfo."""
    my = ids("ID:first-after-idle")
    connection = Structure(t.CONNECTION_INFO, {"commandId": 1, "responseRequired": True,
                                               "connectionId": my["connection"]})  # fmt: skip
    marshaller = Marshaller()
    reader = FrameReader()
    seen: list[int] = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(marshaller.frame(client_wfi()) + marshaller.frame(connection))
        deadline = time.monotonic() + 10
        while t.RESPONSE not in seen and time.monotonic() < deadline:
            frame = reader.next_frame()
            if isinstance(frame, bytes):
                seen.append(marshaller.parse_body(frame).type)
                continue
            chunk = sock.recv(65536)
            assert chunk, f"closed after {seen}"
            reader.receive_data(chunk)
    return seen


def test_the_first_stomp_connection_is_served(tmp_path: Path) -> None:
    with running_broker(workdir=tmp_path) as broker:
        assert stomp_connected(broker.stomp_port).startswith(b"CONNECTED\n")


def test_the_first_openwire_connection_is_served(tmp_path: Path) -> None:
    with running_broker(workdir=tmp_path) as broker:
        peer = Peer(broker.openwire_port)
        try:
            _, answer = peer.connect("ID:first-after-idle")
            assert answer.type == t.RESPONSE
        finally:
            peer.close()


@pytest.mark.parametrize("protocol", ["stomp", "openwire"])
def test_the_first_auto_connection_is_served(tmp_path: Path, protocol: str) -> None:
    with running_broker(AUTO, workdir=tmp_path) as broker:
        if protocol == "stomp":
            assert stomp_connected(broker.auto_port).startswith(b"CONNECTED\n")
        else:
            seen = openwire_answers_first_speaker(broker.auto_port)
            assert seen[0] == t.WIRE_FORMAT_INFO and t.RESPONSE in seen


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_a_port_in_use_is_refused_in_the_loops_words(tmp_path: Path, host: str) -> None:
    """The listeners bind their own sockets to an address (no resolver thread pool, no idna
    codec); a port already taken fails the start as the loop's own bind said it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as taken:
        try:
            taken.bind((host, 0))
        except OSError:
            pytest.skip(f"no {host} here")
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "dovecote.toml"
        config.write_text(
            f'[broker]\ndata_dir = "{tmp_path / "data"}"\n[openwire]\nhost = "{host}"\n'
            "[stomp]\nenabled = false\n[console]\nenabled = false\n"
        )
        done = subprocess.run(
            [sys.executable, "-m", "dovecote", "broker", "--openwire-port", str(port),
             "--config", str(config)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    address = (host, port) if family == socket.AF_INET else (host, port, 0, 0)
    assert (
        f"cannot start the broker: [Errno {errno.EADDRINUSE}] error while attempting to bind on"
        f" address {address!r}: address already in use"
    ) in done.stderr
