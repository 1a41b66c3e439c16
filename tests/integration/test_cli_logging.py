"""The [logging] section on real broker processes: JSON lines to a file, rotation, levels
per logger, --log-level over the file's level, the default output as it always was, and
mistakes named in one line."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dovecote.config import load_config
from dovecote.config.logging import PLAIN_FORMAT, logging_dict
from ports import free_port

DOVECOTE = [sys.executable, "-m", "dovecote"]
PLAIN_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|DEBUG) +[\w.]+: ")


def run_broker(workdir: Path, config: str, *options: str) -> tuple[int, str]:
    """Start ``dovecote broker`` with ``config``, wait for its ready line, stop it with
    SIGTERM; its exit code and what it wrote on stderr."""
    (workdir / "dovecote.toml").write_text(config)
    proc = subprocess.Popen(
        [*DOVECOTE, "broker", "--config", "dovecote.toml", "--stomp-port", "0",
         "--openwire-port", "0", "--console-port", "0", *options],
        cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.startswith("dovecote ready:"):
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


def test_without_the_section_the_output_is_as_before(tmp_path: Path) -> None:
    code, err = run_broker(tmp_path, "")
    assert code == 0
    lines = err.splitlines()
    assert lines and all(PLAIN_LINE.match(line) for line in lines), lines
    assert any("stopped" in line for line in lines)
    # What `logging.basicConfig(level=INFO, format=PLAIN_FORMAT, stream=sys.stderr)` did.
    default = logging_dict(load_config(None).logging)
    assert default["root"] == {"level": "INFO", "handlers": ["stderr"]}
    assert default["formatters"]["lines"] == {"format": PLAIN_FORMAT}
    assert default["handlers"]["stderr"]["stream"] == "ext://sys.stderr"


def test_json_lines_to_a_file(tmp_path: Path) -> None:
    config = '[logging]\nformat = "json"\nfile = "log/dovecote.log"\n'
    code, err = run_broker(tmp_path, config)
    assert code == 0
    assert err == ""  # a file and no stderr = true: nothing on stderr
    records = [
        json.loads(line) for line in (tmp_path / "log/dovecote.log").read_text().splitlines()
    ]
    assert records and all(set(r) == {"time", "level", "logger", "message"} for r in records)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", records[0]["time"])
    assert any("stopped" in r["message"] and r["level"] == "INFO" for r in records)
    assert all(r["logger"].startswith("dovecote") for r in records)


def test_the_admin_servers_warnings_follow_the_section(tmp_path: Path) -> None:
    """uvicorn's own lines (here its warning for a request that is not HTTP) go where
    [logging] says, in its format, not to stderr in uvicorn's."""
    (tmp_path / "dovecote.toml").write_text('[logging]\nformat = "json"\nfile = "d.log"\n')
    console = free_port()
    proc = subprocess.Popen(
        [*DOVECOTE, "broker", "--config", "dovecote.toml", "--stomp-port", "0",
         "--openwire-port", "0", "--console-port", str(console)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("dovecote ready:")
        with socket.create_connection(("127.0.0.1", console), timeout=10) as sock:
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            assert sock.recv(100).startswith(b"HTTP/1.1 400")
        deadline = time.monotonic() + 20
        warned: list[dict[str, str]] = []
        while not warned and time.monotonic() < deadline:
            records = [json.loads(line) for line in (tmp_path / "d.log").read_text().splitlines()]
            warned = [r for r in records if r["logger"].startswith("uvicorn")]
            time.sleep(0.05)
        assert warned and warned[0]["level"] == "WARNING", warned
        assert "Invalid HTTP request" in warned[0]["message"]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert err == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_file_and_stderr_too(tmp_path: Path) -> None:
    code, err = run_broker(tmp_path, '[logging]\nfile = "dovecote.log"\nstderr = true\n')
    assert code == 0
    in_file = (tmp_path / "dovecote.log").read_text().splitlines()
    assert in_file == err.splitlines() and all(PLAIN_LINE.match(line) for line in in_file)


def test_levels_per_logger_and_the_command_line_over_the_file(tmp_path: Path) -> None:
    quiet = '[logging]\nlevel = "warning"\n'
    code, err = run_broker(tmp_path, quiet)
    assert code == 0 and "INFO" not in err
    code, err = run_broker(tmp_path, quiet, "--log-level", "info")
    assert code == 0 and "INFO" in err
    # Root at debug, the broker's own logger held at warning: its info lines go.
    code, err = run_broker(tmp_path, '[logging]\nlevel = "debug"\n[logging.levels]\n'
                           '"dovecote.broker" = "warning"\n"dovecote" = "warning"\n')  # fmt: skip
    assert code == 0
    assert not [line for line in err.splitlines() if " dovecote" in line and "INFO" in line]


def test_the_file_rotates(tmp_path: Path) -> None:
    """500 lines of ~60 bytes with max_bytes 4,000 and backup_count 2: three files, each
    within the limit, the newest lines in the file itself."""
    (tmp_path / "dovecote.toml").write_text(
        '[logging]\nfile = "app.log"\nmax_bytes = 4000\nbackup_count = 2\nformat = "json"\n'
    )
    script = (
        "import logging; from pathlib import Path; from dovecote.config import load_config;"
        "from dovecote.config.logging import apply_logging;"
        "apply_logging(load_config(Path('dovecote.toml')).logging);"
        "[logging.getLogger('dovecote.test').info('line %d', i) for i in range(500)]"
    )
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True, timeout=60)
    files = sorted(p.name for p in tmp_path.glob("app.log*"))
    assert files == ["app.log", "app.log.1", "app.log.2"]
    assert all((tmp_path / name).stat().st_size <= 4000 for name in files)
    last = json.loads((tmp_path / "app.log").read_text().splitlines()[-1])
    assert last["message"] == "line 499" and last["logger"] == "dovecote.test"


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ('[logging]\nlevel = "loud"\n', "logging.level"),
        ('[logging]\nformat = "xml"\n', "logging.format"),
        ('[logging.levels]\n"dovecote" = "verbose"\n', "logging.levels"),
        ('[logging]\nfile = "/proc/nonesuch/dovecote.log"\n', "cannot open the log file"),
    ],
)
def test_mistakes_are_named_in_one_line(tmp_path: Path, config: str, named: str) -> None:
    code, err = run_broker(tmp_path, config)
    assert code == 2
    assert len(err.splitlines()) == 1 and named in err, err
