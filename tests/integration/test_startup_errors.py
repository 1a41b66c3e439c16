"""A broker that cannot start says why in one line, without a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_missing_tls_files_are_named_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "dovecote.toml").write_text(
        '[tls]\ncertificate_file = "absent.pem"\nkey_file = "absent.key"\n'
        "[ssl]\nenabled = true\nport = 0\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "dovecote", "broker", "--config", "dovecote.toml",
         "--stomp-port", "0", "--openwire-port", "0", "--console-port", "0"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]  # after the usual start-up warnings
    assert last.startswith("dovecote: cannot start the broker:")
    assert "absent.pem" in last and "No such file" in last
