"""A group of dovecote broker processes on one replicated LevelDB store (issue 35), each on
fixed free ports (so that a broker restarted, or started again as a slave, is where the
clients' failover URLs look), with its role read from its admin API."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ports import free_port

ROLE_TIMEOUT_S = 30.0


def _pump(stream: Any, sink: list[str]) -> None:
    for line in stream:
        sink.append(line)


@dataclass
class GroupBroker:
    name: str
    workdir: Path
    zk_address: str
    replicas: int = 3
    sync: str = "quorum_mem"
    zk_session_timeout_ms: int = 2000
    extra_config: str = ""
    stomp_port: int = field(default_factory=free_port)
    openwire_port: int = field(default_factory=free_port)
    console_port: int = field(default_factory=free_port)
    replication_port: int = field(default_factory=free_port)
    process: subprocess.Popen[str] | None = None
    log_lines: list[str] = field(default_factory=list)

    @property
    def openwire_url(self) -> str:
        return f"tcp://127.0.0.1:{self.openwire_port}"

    def config(self) -> str:
        return f"""
[broker]
name = "{self.name}"
data_dir = "{self.workdir / "data"}"

[store]
kind = "replicated-leveldb"
replicas = {self.replicas}
zk_address = "{self.zk_address}"
zk_path = "/dovecote/test-group"
zk_session_timeout_ms = {self.zk_session_timeout_ms}
bind = "tcp://127.0.0.1:{self.replication_port}"
sync = "{self.sync}"
{self.extra_config}
"""

    def start(self) -> None:
        assert not self.running, f"{self.name} runs already"
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "dovecote.toml"
        config.write_text(self.config())
        self.log_lines.append(f"--- {self.name} started at {time.monotonic():.3f}\n")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dovecote",
                "broker",
                "--config",
                str(config),
                "--stomp-port",
                str(self.stomp_port),
                "--openwire-port",
                str(self.openwire_port),
                "--console-port",
                str(self.console_port),
            ],
            cwd=self.workdir,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(
            target=_pump, args=(self.process.stdout, self.log_lines), daemon=True
        ).start()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def kill(self) -> None:
        """kill -9, and wait for it to be gone."""
        if self.running:
            assert self.process is not None
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if not self.running:
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)  # a paused one cannot take a SIGTERM
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def api(self, path: str, timeout: float = 2.0) -> tuple[int, Any]:
        """(status, JSON) of an admin API request; (0, None) while nothing answers."""
        url = f"http://127.0.0.1:{self.console_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")
        except (OSError, ValueError):
            return 0, None

    def replication(self) -> dict[str, Any] | None:
        status, body = self.api("/api/replication")
        return body if status == 200 else None

    def role(self) -> str | None:
        status = self.replication()
        return None if status is None else str(status["role"])

    def wait_role(self, *roles: str, timeout: float = ROLE_TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout
        while (role := self.role()) not in roles:
            if not self.running:
                raise AssertionError(f"{self.name} exited:\n{self.log_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} is {role}, not {roles}:\n{self.log_text()}")
            time.sleep(0.05)
        assert role is not None
        return role

    def log_text(self) -> str:
        return "".join(self.log_lines[-80:])


@contextmanager
def running_group(
    zk_address: str, base: Path, size: int = 3, **options: Any
) -> Iterator[list[GroupBroker]]:
    """``size`` brokers of one group, started together; every one stopped afterwards."""
    ports = iter(distinct_ports(4 * size))
    brokers = [
        GroupBroker(f"broker{i}", base / f"broker{i}", zk_address, replicas=size,
                    stomp_port=next(ports), openwire_port=next(ports),
                    console_port=next(ports), replication_port=next(ports), **options)
        for i in range(1, size + 1)
    ]  # fmt: skip
    with ExitStack() as stack:
        for broker in brokers:
            stack.callback(broker.stop)
            broker.start()
        yield brokers


def distinct_ports(count: int) -> list[int]:
    """Free ports of 127.0.0.1, all different (each held until all are found: free_port()
    twice may give one port twice)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def master_of(brokers: list[GroupBroker], timeout: float = ROLE_TIMEOUT_S) -> GroupBroker:
    """The one broker whose role is master, once it serves clients (waits for an election
    and for its listeners)."""
    deadline = time.monotonic() + timeout
    while True:
        masters = [b for b in brokers if b.running and b.role() == "master"]
        if len(masters) == 1 and listening(masters[0].openwire_port):
            return masters[0]
        assert len(masters) < 2, f"two masters: {[b.name for b in masters]}"
        if time.monotonic() > deadline:
            roles = {b.name: b.role() for b in brokers}
            logs = "\n".join(f"== {b.name}\n{b.log_text()}" for b in brokers)
            raise AssertionError(f"no master in {timeout}s: {roles}\n{logs}")
        time.sleep(0.05)


def failover_url(brokers: list[GroupBroker]) -> str:
    urls = ",".join(b.openwire_url for b in brokers)
    return (
        f"failover:({urls})?randomize=false&initialReconnectDelay=50&maxReconnectDelay=500"
        "&timeout=60000"
    )


def listening(port: int) -> bool:
    """Whether something accepts connections on the port (a master's listeners)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def wait_for(check: Callable[[], object], timeout: float, what: str) -> float:
    """Poll until ``check()`` is true; the seconds it took."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"not within {timeout}s: {what}"
        time.sleep(0.05)
    return time.monotonic() - started


def position(broker: GroupBroker) -> int | None:
    status = broker.replication()
    return None if status is None else int(status["position"])


def caught_up(slave: GroupBroker, master: GroupBroker) -> bool:
    """A slave at the master's position."""
    return slave.role() == "slave" and position(slave) == position(master)
