"""The runtime each broker stands on, measured alone: the floor of its idle memory.

dovecote's is the Python interpreter running an asyncio event loop on uvloop (which imports
the ssl module, as asyncio's own loop does): nothing of dovecote loaded. ActiveMQ's is a JVM
with the broker's heap flags running a class that only sleeps. RabbitMQ's is an Erlang VM
(Debian's ``erl``, its default flags) evaluating only a sleep. Each prints ``ready`` once it
is idle; its RSS is read after the same pause the harness gives a broker before reading its
idle RSS, so the two figures compare with the brokers' own.

    .venv/bin/python bench/runtimes.py      # prints the three, in MiB
"""

from __future__ import annotations

import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from activemq import JVM_HEAP  # noqa: E402

SETTLE_S = 1.0
"""As harness._settle: after start-up has finished allocating."""
READY_TIMEOUT_S = 60.0

PYTHON_IDLE = """\
import asyncio
import uvloop

async def idle() -> None:
    print("ready", flush=True)
    await asyncio.sleep(3600)

uvloop.install()
asyncio.run(idle())
"""

LIBRARIES = "msgspec msgspec.toml lmdb msgpack zlib_ng.zlib_ng pathlib argparse tomllib"
"""What dovecote's broker cannot start without beyond the event loop, none of it dovecote's:
msgspec (its configuration: with typing_extensions, datetime, decimal and uuid), the
journal's LMDB, msgpack and zlib-ng, pathlib, argparse (its command line) and tomllib (its
configuration file)."""
PYTHON_LIBRARIES_IDLE = PYTHON_IDLE.replace(
    "import uvloop\n", f"import uvloop\nimport {', '.join(LIBRARIES.split())}\n"
)

JAVA_IDLE = """\
public class Idle {
    public static void main(String[] args) throws InterruptedException {
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(3_600_000L);
    }
}
"""


def status_kib(pid: int, key: str) -> int | None:
    """A figure in kB from /proc/PID/status (VmRSS, VmHWM, ...); None when it has none."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def idle_rss_kib(command: Sequence[str]) -> int:
    """Start ``command``, wait for its ``ready`` line, settle, read its RSS, stop it."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        waiting, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        line = proc.stdout.readline() if waiting else ""
        if line.strip() != "ready":
            proc.kill()
            _, err = proc.communicate()
            raise RuntimeError(f"{command[0]} did not get ready: {line!r} {err[-2000:]}")
        time.sleep(SETTLE_S)
        if proc.poll() is not None:
            raise RuntimeError(f"{command[0]} exited with {proc.returncode} while idle")
        rss = status_kib(proc.pid, "VmRSS")
        if rss is None:
            raise RuntimeError(f"{command[0]} has no VmRSS")
        return rss
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def python_idle_rss_kib() -> int:
    return idle_rss_kib([sys.executable, "-c", PYTHON_IDLE])


def python_libraries_idle_rss_kib() -> int:
    """The floor of dovecote's idle memory: the runtime with the libraries it must load."""
    return idle_rss_kib([sys.executable, "-c", PYTHON_LIBRARIES_IDLE])


def jvm_idle_rss_kib() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-jvm-") as tmp:
        source = Path(tmp) / "Idle.java"
        source.write_text(JAVA_IDLE)
        subprocess.run(["javac", "-d", tmp, str(source)], check=True, capture_output=True)
        return idle_rss_kib(["java", *JVM_HEAP, "-cp", tmp, "Idle"])


ERLANG_IDLE = 'io:format("ready~n"), timer:sleep(infinity).'


def erlang_idle_rss_kib() -> int:
    return idle_rss_kib(["erl", "-noshell", "-eval", ERLANG_IDLE])


IDLE_RSS_KIB = {
    "dovecote": python_idle_rss_kib,
    "activemq": jvm_idle_rss_kib,
    "rabbitmq": erlang_idle_rss_kib,
}
"""The runtime each kind of broker stands on."""


def main() -> None:
    print(f"Python + asyncio + uvloop alone: {python_idle_rss_kib() / 1024:.1f} MiB")
    print(f"... and the libraries ({LIBRARIES}): {python_libraries_idle_rss_kib() / 1024:.1f} MiB")
    print(f"JVM ({' '.join(JVM_HEAP)}) alone: {jvm_idle_rss_kib() / 1024:.1f} MiB")
    print(f"Erlang VM alone: {erlang_idle_rss_kib() / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
