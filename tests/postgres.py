"""A private PostgreSQL server for tests: initdb in a temporary directory, started on a free
port on 127.0.0.1, stopped afterwards. As root it runs as the ``postgres`` user (PostgreSQL
refuses root). ``make test`` installs Debian's postgresql package when it is missing."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ports import free_port


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not candidates:
        raise RuntimeError(f"PostgreSQL's {name} is not installed (make test installs it)")
    return candidates[-1]


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@dataclass
class PostgresServer:
    """A private server: its URL, and stop/start for tests of a database going away."""

    url: str
    data: Path
    options: str
    log: Path

    def start(self) -> None:
        subprocess.run(
            _as_postgres([_binary("pg_ctl"), "-D", str(self.data), "-o", self.options, "-w",
                          "-t", "60", "-l", str(self.log), "start"]),
            check=True, capture_output=True,
        )  # fmt: skip

    def stop(self) -> None:
        subprocess.run(
            _as_postgres([_binary("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                          "stop"]),
            capture_output=True, check=False,
        )  # fmt: skip


@contextmanager
def postgres() -> Iterator[PostgresServer]:
    """A fresh database on a private server, started; stopped and removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="dovecote-pg-"))
    data = root / "data"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(data, "postgres")
    port = free_port()
    subprocess.run(
        _as_postgres([_binary("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
        check=True, capture_output=True,
    )  # fmt: skip
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=on"
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    server = PostgresServer(url, data, options, root / "log")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield a SQLAlchemy URL of a fresh database on a private server."""
    with postgres() as server:
        yield server.url
