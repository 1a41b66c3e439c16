"""The ``dovecote`` command as a user runs it: help, the embedded defaults, config errors,
and a clean stop on SIGTERM and Ctrl-C."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from brokers import running_broker

DOVECOTE = [sys.executable, "-m", "dovecote"]


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DOVECOTE, *args], capture_output=True, text=True, timeout=60, cwd=cwd, check=False
    )


def test_help_lists_the_broker_command() -> None:
    result = _run("--help")
    assert result.returncode == 0
    assert "broker" in result.stdout
    assert "ActiveMQ" in result.stdout


def test_broker_help_names_its_options() -> None:
    result = _run("broker", "--help")
    assert result.returncode == 0
    assert "--config" in result.stdout


def test_invalid_config_is_refused_naming_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[stomp]\nport = 'high'\n")
    result = _run("broker", "--config", str(cfg))
    assert result.returncode == 2
    assert "stomp.port" in result.stderr


def test_unknown_config_key_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[stomp]\nprot = 1\n")
    result = _run("broker", "--config", str(cfg))
    assert result.returncode == 2
    assert "stomp.prot" in result.stderr


def test_missing_config_file_is_refused(tmp_path: Path) -> None:
    result = _run("broker", "--config", str(tmp_path / "none.toml"))
    assert result.returncode == 2
    assert "none.toml" in result.stderr


def test_the_log_level_is_taken_in_any_case_and_a_wrong_one_is_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.toml")  # stops the broker right after the options
    result = _run("broker", "--log-level", "WARNING", "--config", missing)
    assert result.returncode == 2
    assert "cannot read config file" in result.stderr
    result = _run("broker", "--log-level", "loud", "--config", missing)
    assert result.returncode == 2
    assert "invalid choice: 'loud'" in result.stderr


def _stomp_connect(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
        return sock.recv(4096)


def test_embedded_defaults_listen_on_61613_and_sigterm_stops_cleanly(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*DOVECOTE, "broker"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("dovecote ready: stomp=127.0.0.1:61613")
        assert _stomp_connect(61613).startswith(b"CONNECTED")
        with urllib.request.urlopen("http://127.0.0.1:8161/api/broker", timeout=10) as answer:
            assert json.loads(answer.read())["brokerName"] == "localhost"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert "stopped" in (proc.stderr.read() if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ctrl_c_stops_cleanly() -> None:
    with running_broker() as broker:
        assert _stomp_connect(broker.stomp_port).startswith(b"CONNECTED")
        broker.process.send_signal(signal.SIGINT)
        assert broker.process.wait(timeout=20) == 0
        deadline = time.monotonic() + 5
        while "stopped" not in broker.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "stopped" in broker.log_text()


def test_sigterm_stops_a_slave_waiting_for_the_store_lock(tmp_path: Path) -> None:
    """A second broker on the same journal waits as a slave for the master's lock; SIGTERM
    ends that wait (it had waited on until the master died), and the master serves on."""
    with running_broker(workdir=tmp_path) as master:
        slave = subprocess.Popen(
            [*DOVECOTE, "broker", "--stomp-port", "0", "--openwire-port", "0",
             "--console-port", "0"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            assert slave.stderr is not None
            deadline = time.monotonic() + 30
            while "waiting as a slave" not in (line := slave.stderr.readline()):
                assert line and time.monotonic() < deadline, "the slave never waited"
            slave.send_signal(signal.SIGTERM)
            assert slave.wait(timeout=20) == 0
            assert "stopped" in slave.stderr.read()
        finally:
            if slave.poll() is None:
                slave.kill()
                slave.wait()
        assert _stomp_connect(master.stomp_port).startswith(b"CONNECTED")


def test_help_shows_the_defaults() -> None:
    produce = _run("produce", "--help").stdout
    assert "(default: tcp://127.0.0.1:61616)" in " ".join(produce.split())
    assert "(default: 1000)" in produce and "(default: 1024)" in produce
    assert "(default: None)" not in produce and "(default: [])" not in produce
    assert "(default: [logging] level, else info)" in " ".join(
        _run("broker", "--help").stdout.split()
    )
    assert "(default: 20)" in _run("browse", "--help").stdout
