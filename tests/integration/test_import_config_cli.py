"""`dovecote import-config` as a command: the file it writes, what it says on stderr, a
broker started with the result (ports moved to free ones) answering STOMP, and the test
configurations loading in a real ActiveMQ 5.17 (so they are real configurations)."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import stomp

from activemq import HOME
from brokers import running_broker
from ports import free_port
from tlscerts import make_test_pki

DATA = Path(__file__).parent.parent / "data" / "activemq"
DEBIAN = Path("/etc/activemq/instances-available/main/activemq.xml")


def import_config(xml: Path, output: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dovecote", "import-config", str(xml), "-o", str(output)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def free_ports(text: str) -> str:
    """Every ``port = N`` of the generated file moved to a free port."""
    return re.sub(r"(?m)^port = \d+", lambda _: f"port = {free_port()}", text)


def test_cli_writes_the_file_and_names_leftovers(tmp_path: Path) -> None:
    out = tmp_path / "dovecote.toml"
    done = import_config(DATA / "kahadb-ssl-network.xml", out)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    left = [line for line in lines if line.startswith("not carried over: ")]
    assert "not carried over: <transportConnector uri=\"amqp://127.0.0.1:5672\"> at line 110: " \
        "amqp://: dovecote speaks OpenWire and STOMP only" in left  # fmt: skip
    assert lines[-1].startswith(f"wrote {out}: {len(left)} not carried over")
    header = out.read_text().split("\n\n", 1)[0]
    assert f"# Not carried over ({len(left)}):" in header
    assert "at line 110" in header


def test_cli_refuses_what_is_not_activemq(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<beans/>")
    done = import_config(bad, tmp_path / "out.toml")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "dovecote: no <broker> element: is this an ActiveMQ 5.x activemq.xml?"
    )
    assert not (tmp_path / "out.toml").exists()


@pytest.mark.skipif(not DEBIAN.exists(), reason="Debian's activemq package is not installed")
def test_cli_writes_to_stdout_without_output(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dovecote", "import-config", str(DEBIAN)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert tomllib.loads(done.stdout)["openwire"]["port"] == 61616
    assert done.stderr.startswith("not carried over: <kahaDB directory=")
    missing = import_config(DEBIAN, tmp_path / "no-such-dir" / "out.toml")
    assert missing.returncode == 2
    out = tmp_path / "no-such-dir" / "out.toml"
    assert missing.stderr == f"dovecote: cannot write {out}: No such file or directory\n"


def answers_stomp(address: tuple[str, int], user: str | None, password: str | None) -> str:
    """Send one message to a queue and read it back over STOMP; its body."""
    got: list[str] = []

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: stomp.utils.Frame) -> None:
            got.append(frame.body)

    conn = stomp.Connection([address])
    conn.set_listener("", Listener())
    conn.connect(user, password, wait=True)
    try:
        conn.subscribe("/queue/orders.imported", id="1", ack="auto")
        conn.send("/queue/orders.imported", "hello from an imported config")
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        conn.disconnect()
    return got[0] if got else ""


@pytest.mark.skipif(not DEBIAN.exists(), reason="Debian's activemq package is not installed")
def test_broker_starts_with_debian_conversion(tmp_path: Path) -> None:
    out = tmp_path / "dovecote.toml"
    assert import_config(DEBIAN, out).returncode == 0
    # The packaged file has no STOMP connector: turned on here to talk to the broker.
    text = out.read_text().replace("[stomp]\nenabled = false", "[stomp]\nenabled = true")
    with running_broker(free_ports(text)) as broker:
        assert answers_stomp(broker.stomp_address, None, None) == "hello from an imported config"
        assert (broker.workdir / "data" / "journal").is_dir()


def test_broker_starts_with_rich_conversion(tmp_path: Path) -> None:
    out = tmp_path / "dovecote.toml"
    assert import_config(DATA / "kahadb-ssl-network.xml", out).returncode == 0
    (tmp_path / "pki").mkdir()
    pki = make_test_pki(tmp_path / "pki")
    text = free_ports(out.read_text())
    text = re.sub(r"(?m)^certificate_file = .*$", f'certificate_file = "{pki.broker_cert}"', text)
    text = re.sub(r"(?m)^key_file = .*$", f'key_file = "{pki.broker_key}"', text)
    with running_broker(text) as broker:
        assert set(broker.ports) >= {"stomp", "openwire", "ssl", "auto"}
        body = answers_stomp(broker.stomp_address, "app", "app-secret")  # hashed from the XML
        assert body == "hello from an imported config"
        with pytest.raises(stomp.exception.ConnectFailedException):
            answers_stomp(broker.stomp_address, "app", "wrong")


def _activemq_loads(xml: Path, tmp_path: Path) -> str:
    """Start ActiveMQ 5.17 on a copy of ``xml`` with free ports and a real key store; its log
    once it has started or stopped (a configuration error stops it)."""
    base = tmp_path / "amq"
    base.mkdir()
    (tmp_path / "pki").mkdir()
    pki = make_test_pki(tmp_path / "pki")
    text = re.sub(r"://(127\.0\.0\.1|0\.0\.0\.0):(6161\d|61608|5672|1883)",
                  lambda m: f"://127.0.0.1:{free_port()}", xml.read_text())  # fmt: skip
    for name in ("broker.ks", "west.p12"):
        text = text.replace(f"${{activemq.conf}}/{name}", str(pki.broker_p12))
    text = text.replace("${activemq.conf}/clients.p12", str(pki.java_trust_store))
    text = text.replace(
        'keyStorePassword="password"', 'keyStorePassword="secret" keyStoreType="pkcs12"'
    )
    text = text.replace('StorePassword="changeit"', 'StorePassword="secret"')
    # Debian's package has no AMQP transport: its connector goes from the copy.
    text = re.sub(r'\s*<transportConnector name="amqp"[^>]*/>', "", text)
    conf = base / "activemq.xml"
    conf.write_text(text)
    shutil.copy(DATA / "credentials.properties", base / "credentials.properties")
    log = base / "out.log"
    log4j = base / "log4j.properties"  # log lines on stdout: the started line, the errors
    log4j.write_text(
        "log4j.rootLogger=INFO, o\nlog4j.appender.o=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.o.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.o.layout.ConversionPattern=%m%n\n"
    )
    proc = subprocess.Popen(
        ["java", "-Xmx256M", f"-Dlog4j.configuration=file:{log4j}", f"-Dactivemq.home={HOME}",
         f"-Dactivemq.base={base}", f"-Dactivemq.conf={base}", f"-Dactivemq.data={base / 'data'}",
         "-Dbridge.password=x",
         "-jar", str(HOME / "bin" / "activemq.jar"), "start", f"xbean:file:{conf}"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            content = log.read_text(errors="replace")
            if re.search(
                r"Apache ActiveMQ \S+ \(\S+, \S+\) started|Failed to start|org\.postgresql\.Driver",
                content,
            ):
                break
            time.sleep(0.2)
        return log.read_text(errors="replace")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not (HOME / "bin" / "activemq.jar").exists(), reason="no ActiveMQ here")
def test_rich_configuration_loads_in_activemq(tmp_path: Path) -> None:
    log = _activemq_loads(DATA / "kahadb-ssl-network.xml", tmp_path)
    assert re.search(r"Apache ActiveMQ \S+ \(east, \S+\) started", log), log[-3000:]
    assert "cvc-" not in log and "Invalid property" not in log


@pytest.mark.skipif(not (HOME / "bin" / "activemq.jar").exists(), reason="no ActiveMQ here")
def test_jdbc_configuration_parses_in_activemq(tmp_path: Path) -> None:
    """Spring and ActiveMQ's schema take every element and attribute; the start then fails
    on the database (Debian's package has no PostgreSQL driver), not on the file."""
    log = _activemq_loads(DATA / "jdbc-masterslave.xml", tmp_path)
    assert "cvc-" not in log and "Invalid property" not in log, log[-3000:]
    assert "org.postgresql.Driver" in log or re.search(r"\(west, \S+\) started", log), log[-3000:]
