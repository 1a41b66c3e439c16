"""The broker as plain Python: what runs where build_native.py could not compile (no C
compiler, no Python headers). The rest of the suite runs the compiled modules where they
were built; this runs a copy of the sources with no extension beside them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from brokers import running_broker
from dovecote.protocol.stomp import Frame
from stomplink import Link

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_broker_runs_from_its_sources_alone(tmp_path: Path) -> None:
    plain = tmp_path / "src"
    shutil.copytree(SRC / "dovecote", plain / "dovecote", ignore=shutil.ignore_patterns("*.so"))
    env = {"PYTHONPATH": str(plain)}
    imported = subprocess.run(
        [sys.executable, "-c", "import dovecote.broker.broker as m; print(m.__file__)"],
        env={**env, "PATH": ""}, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert imported == str(plain / "dovecote" / "broker" / "broker.py")
    with running_broker(workdir=tmp_path, env=env) as broker:
        link = Link(broker.stomp_port)
        for n in range(3):
            link.send(Frame("SEND", (("destination", "/queue/plain"), ("persistent", "true"),
                                     ("receipt", f"s{n}")), f"m{n}".encode()))  # fmt: skip
            assert link.read().command == "RECEIPT"
        got = [m.body for m in Link(broker.stomp_port).take_backlog("/queue/plain")]
        assert got == [b"m0", b"m1", b"m2"]
