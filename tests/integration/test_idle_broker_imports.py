"""What an idle broker does not carry (issue 33: idle memory). `dovecote broker` on the
journal store, started as `make run` starts it, in a fresh interpreter: once it has started
(the moment the CLI tunes the collector, just before its "dovecote ready" line), none of
the modules below is imported. Each is a sizeable share of an idle broker's memory
(docs/performance.md) that only some brokers need, and loads when they do: the admin API
at the console's first request, SQLAlchemy for the SQL stores, plyvel and kazoo for
LevelDB and replication, the client and the Spark source for their own users; the command
line is argparse (typer would bring pydantic and rich); logging with a [logging] table
beyond plain lines on stderr; each protocol's connection code at its listener's first
connection. Measured: logging.config and shutil with what they bring were 1.0 MiB of an
idle broker's 34.9 MiB (pure Python); what the protocols, the bridge and the idna codec
take is in bench/bounds.py (IDLE)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

NOT_AT_IDLE = [
    # the admin API (web/console.py loads it at the first request)
    "starlette", "uvicorn", "prometheus_client", "anyio", "h11", "dovecote.web.admin",
    # stores other than the journal
    "sqlalchemy", "dovecote.store.sql", "plyvel", "dovecote.store.leveldb", "kazoo",
    "dovecote.store.replicated.adapter",
    # what the command line and the configuration do without
    "pydantic", "typer", "click", "rich",
    # other users' parts of the package
    "dovecote.client", "dovecote.spark", "pyspark", "dovecote.migrate", "dovecote.tools",
    # nothing at start needs a process pool or foreign calls
    "multiprocessing", "ctypes",
    # plain log lines on stderr are set up without dictConfig's modules, and a fresh store
    # removes no directory (shutil brings the archivers' bz2 and lzma)
    "logging.config", "logging.handlers", "socketserver", "pickle", "shutil", "bz2", "lzma",
    # password hashing loads with the first login (or console request), not before
    "hashlib", "hmac", "secrets", "random",
    # each protocol's connection, codec and frame readers load with its listener's first
    # connection (transport/servers.py); a network bridge with the first bridge
    "dovecote.transport.stomp", "dovecote.protocol.stomp", "dovecote.protocol.stomp.converter",
    "dovecote.transport.openwire", "dovecote.protocol.openwire.converter",
    "dovecote.protocol.openwire.send_frames", "dovecote.protocol.openwire.dispatch_frames",
    "dovecote.network.bridge", "dovecote.network.forwarding", "dovecote.network.duplex",
    # the listeners bind their own sockets to an address: the loop would resolve it with
    # the idna codec (unicodedata, stringprep) and a thread pool
    "encodings.idna", "unicodedata", "stringprep",
    # JSON log lines and the console's refusals import json when they write one
    "json",
    # a broker on the journal keeps neither messages nor schedules in memory
    "dovecote.store.memory", "dovecote.store.schedules",
]  # fmt: skip

SCRIPT = textwrap.dedent(
    """
    import sys
    import dovecote.cli as cli

    NOT_AT_IDLE = sys.argv[1].split(",")  # (not json: it is in the list)
    tune = cli.tune_collector

    def started():
        tune()
        loaded = [m for m in NOT_AT_IDLE if m in sys.modules]
        print("loaded: " + ",".join(loaded), flush=True)

    cli.tune_collector = started
    cli.main(["broker", "--stomp-port", "0", "--openwire-port", "0", "--console-port", "0",
              "--config", sys.argv[2]])
    """
)


def test_an_idle_broker_has_not_imported_what_only_some_brokers_need(tmp_path: Path) -> None:
    config = tmp_path / "dovecote.toml"
    config.write_text(
        f'[broker]\ndata_dir = "{tmp_path / "data"}"\n'
        '[store]\nkind = "journal"\nenable_journal_disk_syncs = true\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, ",".join(NOT_AT_IDLE), str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("loaded: "):
                assert line.removeprefix("loaded: ").split() == []
                break
        else:
            raise AssertionError(f"the broker did not start: {lines}")
        ready = proc.stdout.readline()
        assert ready.startswith("dovecote ready: ")  # the broker that was looked at serves
    finally:
        proc.terminate()
        proc.wait(30)
