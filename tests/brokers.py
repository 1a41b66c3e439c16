"""Starting real dovecote broker processes for tests: free ports, readiness by polling the
ready line the CLI prints, and a stop that always runs."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

READY_TIMEOUT_S = 20.0


@dataclass
class BrokerProcess:
    process: subprocess.Popen[str]
    stomp_port: int
    openwire_port: int
    workdir: Path
    log_lines: list[str]
    auto_port: int = 0
    console_port: int = 0
    ports: dict[str, int] = field(default_factory=dict)
    """Every listener's port, by the name the ready line gives it (ssl, stomp_ssl, ...)."""

    @property
    def stomp_address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.stomp_port)

    def log_text(self) -> str:
        return "".join(self.log_lines)


def _pump(stream: object, sink: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        sink.append(line)


@contextmanager
def running_broker(
    config_toml: str = "",
    workdir: Path | None = None,
    openwire_port: int = 0,
    env: dict[str, str] | None = None,
) -> Iterator[BrokerProcess]:
    """Start ``dovecote broker`` on a free STOMP port (``env`` added to the environment);
    stop it (SIGTERM, then SIGKILL)."""
    with tempfile.TemporaryDirectory(prefix="dovecote-test-") as tmp:
        wd = workdir or Path(tmp)
        cmd = [sys.executable, "-m", "dovecote", "broker", "--stomp-port", "0",
               "--openwire-port", str(openwire_port), "--console-port", "0"]  # fmt: skip
        if config_toml:
            cfg = wd / "dovecote.toml"
            cfg.write_text(config_toml)
            cmd += ["--config", str(cfg)]
        proc = subprocess.Popen(
            cmd,
            cwd=wd,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        log_lines: list[str] = []
        threading.Thread(target=_pump, args=(proc.stderr, log_lines), daemon=True).start()
        try:
            ports = _wait_ready(proc, log_lines)
            threading.Thread(target=_pump, args=(proc.stdout, log_lines), daemon=True).start()
            broker = BrokerProcess(proc, ports["stomp"], ports.get("openwire", 0), wd, log_lines)
            broker.auto_port = ports.get("auto", 0)
            broker.console_port = ports.get("console", 0)
            broker.ports = ports
            yield broker
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _wait_ready(proc: subprocess.Popen[str], log_lines: list[str]) -> dict[str, int]:
    deadline = time.monotonic() + READY_TIMEOUT_S
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            proc.wait(timeout=5)
            raise RuntimeError(f"broker exited ({proc.returncode}):\n{''.join(log_lines)}")
        if line.startswith("dovecote ready:"):
            fields = dict(part.split("=", 1) for part in line.split()[2:])
            return {name: int(addr.rsplit(":", 1)[1]) for name, addr in fields.items()}
    raise RuntimeError(f"broker not ready in {READY_TIMEOUT_S}s:\n{''.join(log_lines)}")
