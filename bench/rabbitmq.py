"""RabbitMQ 3.10 with its STOMP plugin, the benchmark's second peer (issue 33): a private node
on loopback, on free ports, with its own data directory, started by Debian's
``rabbitmq-server`` (``make bench-deps`` installs it), ready when its STOMP port accepts and
its pid file names the Erlang VM, stopped with ``rabbitmqctl stop`` whatever happened.

The Debian launcher runs the node as the ``rabbitmq`` user in a session of its own, so the
data directory is handed to that user and a signal to the launcher does not reach the node:
``rabbitmqctl -n NODE stop PIDFILE`` does, and waits for the VM to exit (the VM is killed by
its pid if it has not exited after that). An ``epmd`` daemon stays behind, as after any
Erlang node; it listens on loopback only (``ERL_EPMD_ADDRESS``) and is harmless.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from activemq import accepts
from ports import free_port

SBIN = Path("/usr/sbin")
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
CTL_PORT_OFFSET = 10_000
"""rabbitmqctl's own distribution ports are the node's + 10000 (..+10010): the node's must
leave room below 65536."""
EPMD_ENV = {"ERL_EPMD_ADDRESS": "127.0.0.1"}


def command(name: str) -> str | None:
    """Where ``name`` (rabbitmq-server, rabbitmqctl) is installed, if it is (/usr/sbin is not
    on every user's PATH)."""
    return shutil.which(name) or (str(SBIN / name) if (SBIN / name).exists() else None)


def missing_reason() -> str | None:
    """Why no RabbitMQ can run here, or None when it can."""
    if command("rabbitmq-server") is None or command("rabbitmqctl") is None:
        return "rabbitmq-server is not installed (make bench-deps installs it)"
    if os.geteuid() != 0:
        return "Debian's rabbitmq-server runs a node only for root or the rabbitmq user"
    return None


@dataclass
class RabbitMQ:
    node: str
    pid: int
    """The Erlang VM's (beam.smp): its CPU, RSS and disk writes are the broker's."""
    stomp_port: int
    base: Path


def node_name(base: Path) -> str:
    """The same for the same directory: a node's data (Mnesia) is kept under its name, so a
    restart on ``base`` must use it again."""
    return "bench-" + re.sub(r"[^A-Za-z0-9_-]", "-", base.name) + "@localhost"


def _dist_port() -> int:
    while (port := free_port()) >= 65_535 - CTL_PORT_OFFSET - 10:
        pass
    return port


@contextmanager
def running_rabbitmq(base: Path) -> Iterator[RabbitMQ]:
    """Start a node keeping its data in ``base`` (kept afterwards: start again on the same
    ``base`` to recover what it stored); stop it on the way out, failure or not. ``base``
    is handed to the rabbitmq user, who must be able to reach it (a directory in /tmp)."""
    reason = missing_reason()
    if reason is not None:
        raise RuntimeError(reason)
    stomp, node = free_port(), node_name(base)
    for sub in ("mnesia", "log"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (base / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = 127.0.0.1:{free_port()}\n"
        f"stomp.listeners.tcp.1 = 127.0.0.1:{stomp}\n"
        "loopback_users = none\nstomp.default_user = guest\nstomp.default_pass = guest\n"
    )
    (base / "enabled_plugins").write_text("[rabbitmq_stomp].\n")
    pid_file = base / "rabbitmq.pid"
    pid_file.unlink(missing_ok=True)
    subprocess.run(["chown", "-R", "rabbitmq:rabbitmq", str(base)], check=True)
    env = {
        **os.environ,
        **EPMD_ENV,
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_PID_FILE": str(pid_file),
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_DIST_PORT": str(_dist_port()),
    }
    launcher = subprocess.Popen(
        [str(command("rabbitmq-server"))],
        env=env,
        stdout=(base / "out.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not (accepts(stomp) and _pid(pid_file)):
            if launcher.poll() is not None or time.monotonic() > deadline:
                log = (base / "out.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"RabbitMQ did not start:\n{log}")
            time.sleep(0.1)
        yield RabbitMQ(node, _pid(pid_file), stomp, base)
    finally:
        stop(node, pid_file)
        try:
            launcher.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            launcher.kill()
            launcher.wait()


def stop(node: str, pid_file: Path) -> None:
    """``rabbitmqctl stop``, which waits for the VM named in ``pid_file`` to exit; the VM
    is killed if it is still there after that (a node that never finished starting)."""
    ctl = [str(command("rabbitmqctl")), "-n", node, "stop", str(pid_file)]
    with suppress(subprocess.TimeoutExpired):
        subprocess.run(
            ctl, env={**os.environ, **EPMD_ENV}, capture_output=True, timeout=STOP_TIMEOUT_S
        )
    pid = _pid(pid_file)
    if pid and Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)


def _pid(pid_file: Path) -> int:
    try:
        return int(pid_file.read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0
