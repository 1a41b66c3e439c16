"""The wheel as a user installs it: built by build_dist.py (what ``make dist`` runs),
installed into a fresh virtual environment without extras, its ``dovecote broker`` started
and a message exchanged with stomp.py; without the extras, a feature that needs one names
it; ``dovecote[spark]`` brings the Spark source.

Installs come from uv's cache (``--offline``; the dependencies at the versions uv.lock
pins, as ``make test`` installed them), so a fresh environment takes well under a second.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from stompclient import Client

ROOT = Path(__file__).resolve().parents[2]
LONG = os.environ.get("DOVECOTE_LONG") == "1"
READY_TIMEOUT_S = 30.0


def _uv() -> str:
    local = ROOT / ".tools" / "bin" / "uv"
    found = str(local) if local.exists() else shutil.which("uv")
    if found is None:
        pytest.fail("uv is needed (make test installs it in .tools/)")
    return found


def _run(*cmd: str | Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600,
                            env={**os.environ, **(env or {})}, cwd=ROOT, check=False)  # fmt: skip
    assert result.returncode == 0, f"{cmd}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _make_n(*args: str) -> str:
    """What ``make -n`` would run, also under ``make test`` (whose MAKEFLAGS and MAKELEVEL
    would add make[1]'s Entering/Leaving directory lines)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    result = subprocess.run(["make", "--no-print-directory", "-n", *args], capture_output=True,
                            text=True, timeout=600, env=env, cwd=ROOT, check=False)  # fmt: skip
    assert result.returncode == 0, f"make -n {args}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def build(out: Path, native: bool) -> list[Path]:
    """What ``make dist`` makes (native: with the compiled wheel too), into ``out``; the
    working tree gets no compiled module (it would shadow later edits of its source)."""
    before = set((ROOT / "src").rglob("*.so"))
    options = [] if native else ["--pure-only"]
    _run(sys.executable, ROOT / "build_dist.py", "--uv", _uv(), "--out", out, *options)
    assert set((ROOT / "src").rglob("*.so")) == before
    return sorted(out.iterdir())


@contextmanager
def fresh_venv(wheel: Path, extras: str = "") -> Iterator[Path]:
    """A new virtual environment with ``wheel`` (and ``extras``) installed, its python;
    removed afterwards (with the spark extra it is ~800 MB)."""
    with tempfile.TemporaryDirectory(prefix="dovecote-venv-") as tmp:
        yield _install(Path(tmp) / "venv", wheel, extras)


def _install(where: Path, wheel: Path, extras: str) -> Path:
    uv = _uv()
    python = os.path.realpath(sys.executable)  # the interpreter behind the test's venv
    _run(uv, "venv", "--quiet", "--python", python, where)
    # The dependencies at the lock's versions (from the cache, where uv sync put them),
    # then the wheel, which finds its requirements met.
    sync = ["sync", "--frozen", "--no-dev", "--no-install-project", "--offline", "--quiet"]
    if extras:
        sync += ["--extra", extras]
    _run(uv, *sync, env={"UV_PROJECT_ENVIRONMENT": str(where)})
    target = f"{wheel}[{extras}]" if extras else str(wheel)
    _run(uv, "pip", "install", "--offline", "--quiet", "--python", where / "bin" / "python",
         target)  # fmt: skip
    return where / "bin" / "python"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = build(tmp_path_factory.mktemp("dist"), native=False)
    names = sorted(p.name for p in built)
    assert names == ["dovecote-0.1.0-py3-none-any.whl", "dovecote-0.1.0.tar.gz"], names
    return next(p for p in built if p.suffix == ".whl")


@pytest.fixture(scope="module")
def base_python(wheel: Path) -> Iterator[Path]:
    with fresh_venv(wheel) as python:
        yield python


def installed(python: Path) -> set[str]:
    out = _run(_uv(), "pip", "list", "--python", python, "--format", "freeze")
    return {line.split("==")[0].lower() for line in out.split()}


StartBroker = Callable[..., tuple[subprocess.Popen[str], int]]


@pytest.fixture
def broker_from(tmp_path: Path) -> Iterator[StartBroker]:
    """start(python, *args): ``dovecote broker`` from that environment on free ports, its
    process and STOMP port; every broker started is stopped after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(python: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
        dovecote = python.parent / "dovecote"  # the console script the wheel installs
        proc = subprocess.Popen(
            [dovecote, "broker", "--stomp-port", "0", "--openwire-port", "0",
             "--console-port", "0", *args],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        started.append(proc)
        assert proc.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("dovecote ready:"):
                fields = dict(part.split("=", 1) for part in line.split()[2:])
                return proc, int(fields["stomp"].rsplit(":", 1)[1])
        proc.kill()
        raise AssertionError(f"no ready line: {proc.stderr.read() if proc.stderr else ''}")

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def exchange(port: int) -> None:
    client = Client(("127.0.0.1", port))
    try:
        client.subscribe("/queue/packaging")
        client.send("/queue/packaging", "from a wheel")
        assert client.receive().body == "from a wheel"
    finally:
        client.conn.disconnect()


def test_the_wheel_without_extras_runs_a_broker(
    base_python: Path, broker_from: StartBroker
) -> None:
    have = installed(base_python)
    assert "dovecote" in have
    # The base install: no Spark, no PostgreSQL driver, no LevelDB, no dev tools.
    assert not have & {"pyspark", "pyarrow", "pandas", "psycopg", "plyvel", "kazoo", "pytest",
                       "mypy", "ruff", "playwright", "setuptools"}  # fmt: skip
    proc, stomp_port = broker_from(base_python)
    exchange(stomp_port)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0


def test_without_an_extra_its_feature_names_it(base_python: Path, tmp_path: Path) -> None:
    spark = subprocess.run([base_python, "-c", "import dovecote.spark"], capture_output=True,
                           text=True, timeout=60, check=False)  # fmt: skip
    assert spark.returncode == 1
    assert 'pip install "dovecote[spark]"' in spark.stderr.strip().splitlines()[-1]
    config = tmp_path / "dovecote.toml"
    url = "postgresql+psycopg://me:secret@127.0.0.1:1/db"
    config.write_text(f'[store]\nkind = "sql"\nurl = "{url}"\n')
    sql = subprocess.run([base_python.parent / "dovecote", "broker", "--config", config],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         check=False)  # fmt: skip
    assert sql.returncode == 2, sql.stderr
    lines = sql.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert 'needs psycopg, which is not installed: pip install "dovecote[postgresql]"' in lines[0]
    assert "secret" not in lines[0]


def test_the_spark_extra_resolves(wheel: Path, base_python: Path) -> None:
    """Short form: the wheel's metadata asks for Spark's libraries under the extra, and
    what installing it would add to the base environment at the lock's versions."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read("dovecote-0.1.0.dist-info/METADATA").decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    for name in ("pyspark", "pyarrow", "pandas"):
        assert any(name in r and "extra == 'spark'" in r for r in requires), requires
    assert not [r for r in requires if "pyspark" in r or "psycopg" in r if "extra ==" not in r]
    dry = ["sync", "--frozen", "--no-dev", "--no-install-project", "--offline", "--dry-run",
           "--extra", "spark"]  # fmt: skip
    result = subprocess.run([_uv(), *dry], capture_output=True, text=True, timeout=120,
                            cwd=ROOT, env={**os.environ, "UV_PROJECT_ENVIRONMENT":
                            str(base_python.parent.parent)}, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    for name in ("pyspark", "pyarrow", "pandas"):
        assert f"+ {name}==" in result.stderr, result.stderr


@pytest.mark.slow
@pytest.mark.skipif(not LONG, reason="DOVECOTE_LONG=1: installs pyspark (~800 MB, ~20 s)")
def test_the_spark_extra_brings_the_spark_source(wheel: Path) -> None:
    with fresh_venv(wheel, extras="spark") as python:
        out = _run(python, "-c", "import dovecote.spark as s; print(s.DovecoteDataSource.name())")
    assert out.strip() == "dovecote"


@pytest.mark.slow
@pytest.mark.timeout(1200)  # mypyc on two shared cores: minutes
@pytest.mark.skipif(not LONG, reason="DOVECOTE_LONG=1: compiles the modules with mypyc")
def test_the_compiled_wheel_runs_a_broker(tmp_path: Path, broker_from: StartBroker) -> None:
    built = build(tmp_path / "dist", native=True)
    native = [p for p in built if p.suffix == ".whl" and not p.name.endswith("none-any.whl")]
    assert len(native) == 1, built
    with zipfile.ZipFile(native[0]) as archive:
        compiled = [n for n in archive.namelist() if n.endswith(".so")]
    assert "dovecote/broker/queue" in " ".join(compiled)
    with fresh_venv(native[0]) as python:
        loaded = _run(python, "-c", "import dovecote.broker.queue as q; print(q.__file__)")
        assert loaded.strip().endswith(".so")
        proc, stomp_port = broker_from(python)
        exchange(stomp_port)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


def test_make_run_installs_the_base_and_passes_the_configuration() -> None:
    """What `make run` would do (make -n: printed, nothing run): the base install and the
    build tools only, no dev group, the extras asked for, the configuration passed."""
    out = _make_n("run", "CONFIG=conf/my broker.toml", "EXTRAS=leveldb postgresql")
    syncs = [line for line in out.splitlines() if " sync " in line]
    assert syncs and all("--no-default-groups --group build" in line for line in syncs), out
    assert not [line for line in syncs if "--all-extras" in line or "--group dev" in line]
    assert any("--extra leveldb --extra postgresql" in line for line in syncs), out
    assert out.splitlines()[-1] == '.venv/bin/dovecote broker --config "conf/my broker.toml"'


def test_make_dist_runs_what_the_tests_build_with() -> None:
    """`make dist` (make -n: printed, nothing run) runs build_dist.py, which the tests above
    run: the files it writes are the ones they install."""
    command = _make_n("dist").splitlines()[-1].split()
    assert command[1:] == ["build_dist.py", "--uv", ".tools/bin/uv", "--out", "dist"]
    assert (ROOT / command[1]).is_file()
