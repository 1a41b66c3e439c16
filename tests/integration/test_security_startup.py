"""Secure by default, beyond ActiveMQ: `dovecote broker` will not listen beyond loopback
with nobody authenticated, and says what to do, before it binds anything; and
`dovecote passwd` prints a hash the broker accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import stomp

from brokers import running_broker
from dovecote.broker.security.users import verify_password


def broker_exit(tmp_path: Path, config: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "dovecote.toml").write_text(config)
    return subprocess.run(
        [sys.executable, "-m", "dovecote", "broker", "-c", "dovecote.toml",
         "--stomp-port", "0", "--openwire-port", "0", "--console-port", "0"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_a_listener_beyond_loopback_without_authentication_refuses_to_start(
    tmp_path: Path,
) -> None:
    done = broker_exit(tmp_path, '[openwire]\nhost = "0.0.0.0"\n')
    assert done.returncode == 2
    assert "dovecote ready" not in done.stdout
    message = done.stderr.strip().splitlines()[-1]
    assert message == (
        "dovecote: openwire.host = '0.0.0.0' listens beyond loopback with no authentication: "
        "configure [security] users, or set [security] allow_anonymous = true to let anyone in "
        "on purpose"
    )
    assert "Traceback" not in done.stderr


def test_a_broken_users_file_stops_the_start_with_its_reason(tmp_path: Path) -> None:
    done = broker_exit(tmp_path, '[security]\nusers_file = "missing.toml"\n')
    assert done.returncode == 2
    assert "cannot read security.users_file missing.toml" in done.stderr
    assert "Traceback" not in done.stderr


def test_passwd_prints_a_hash_the_broker_logs_users_in_with(tmp_path: Path) -> None:
    made = subprocess.run(
        [sys.executable, "-m", "dovecote", "passwd", "--stdin"],
        input="s3cret pass\n", capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    hashed = made.stdout.strip()
    assert verify_password(hashed, "s3cret pass")
    config = f'[[security.users]]\nname = "carol"\npassword = "{hashed}"\n'
    with running_broker(config, workdir=tmp_path) as broker:
        conn = stomp.Connection([broker.stomp_address])
        conn.connect("carol", "s3cret pass", wait=True)
        assert conn.is_connected()
        conn.disconnect()
        refused = subprocess.run(
            [sys.executable, "-m", "dovecote", "passwd", "--stdin"],
            input="\n", capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert refused.returncode == 1
        assert "an empty password" in refused.stderr
