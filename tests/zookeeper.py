"""Starting a real ZooKeeper for tests (the replicated store's coordination, issue 35): Debian's
zookeeper package run by its Java main class with a generated zoo.cfg in a temporary
directory, on free ports of 127.0.0.1 only, its admin server off; ready when it answers
``srvr`` as a serving server (a leader, follower or standalone); stopped also when the test
fails. ``running_zookeeper`` is one server; ``running_ensemble`` three (the long form)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ports import free_port

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")  # its manifest names its dependencies
LOGGER_JAR = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"  # standalone without peers
READY_TIMEOUT_S = 30.0
TICK_MS = 250
"""Sessions may last 2 to 20 ticks: 0.5 to 5 s, around the store's 2 s default."""


def zookeeper_available() -> bool:
    return ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    """ZooKeeper's answer to one of its four-letter commands ("" when it does not answer)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


@dataclass
class ZooKeeperServer:
    """One ZooKeeper server process; ``stop`` and ``start`` again keep its data."""

    directory: Path
    client_port: int
    peers: list[tuple[int, int, int]] = field(default_factory=list)
    """(id, quorum port, election port) of every server of an ensemble; [] standalone."""
    server_id: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def _write_config(self) -> Path:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={TICK_MS}", "initLimit=20", "syncLimit=10",
            f"dataDir={data}", f"clientPort={self.client_port}", "clientPortAddress=127.0.0.1",
            "admin.enableServer=false", "4lw.commands.whitelist=srvr,ruok,mntr",
            "maxClientCnxns=0",
        ]  # fmt: skip
        if self.peers:
            (data / "myid").write_text(f"{self.server_id}\n")
            lines += [f"server.{i}=127.0.0.1:{q}:{e}" for i, q, e in self.peers]
        config = self.directory / "zoo.cfg"
        config.write_text("\n".join(lines) + "\n")
        return config

    def start(self, wait: bool = True) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        config = self._write_config()
        with open(self.directory / "zookeeper.log", "ab") as log:  # the child has its own copy
            self.process = subprocess.Popen(
                [
                    "java",
                    "-Xmx96m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-cp",
                    f"{ZOOKEEPER_JAR}:{LOGGER_JAR}",
                    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                    "-Dzookeeper.admin.enableServer=false",
                    MAIN_CLASS,
                    str(config),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if wait:
            self.wait_serving()

    def serving(self) -> bool:
        return "Mode:" in four_letter_word(self.client_port, "srvr")

    def wait_serving(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not self.serving():
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited ({self.process.returncode}):\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ZooKeeper not serving in {timeout}s:\n{self.log()}")
            time.sleep(0.1)

    def stop(self, kill: bool = False) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def log(self) -> str:
        path = self.directory / "zookeeper.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


@contextmanager
def _directory(base: Path | None) -> Iterator[Path]:
    if base is not None:
        base.mkdir(parents=True, exist_ok=True)
        yield base
        return
    with tempfile.TemporaryDirectory(prefix="dovecote-zk-") as tmp:
        yield Path(tmp)


@contextmanager
def running_zookeeper(base: Path | None = None) -> Iterator[ZooKeeperServer]:
    """A standalone ZooKeeper on a free port of 127.0.0.1, stopped afterwards."""
    with _directory(base) as directory:
        server = ZooKeeperServer(directory, free_port())
        try:
            server.start()
            yield server
        finally:
            server.stop()


@dataclass
class Ensemble:
    servers: list[ZooKeeperServer]

    @property
    def address(self) -> str:
        """The connect string a client gives: every server."""
        return ",".join(s.address for s in self.servers)


@contextmanager
def running_ensemble(size: int = 3, base: Path | None = None) -> Iterator[Ensemble]:
    """``size`` ZooKeeper servers forming one ensemble on 127.0.0.1, stopped afterwards."""
    with _directory(base) as directory, ExitStack() as stack:
        peers = [(i, free_port(), free_port()) for i in range(1, size + 1)]
        servers = [
            ZooKeeperServer(directory / f"zk{i}", free_port(), peers, server_id=i)
            for i, _, _ in peers
        ]
        for server in servers:
            stack.callback(server.stop)
            server.start(wait=False)
        for server in servers:
            server.wait_serving()
        yield Ensemble(servers)
