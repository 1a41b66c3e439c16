"""A real ActiveMQ 5.17 (Debian's activemq package) for tests: the packaged configuration
copied to a temporary directory, OpenWire and STOMP moved to free ports on 127.0.0.1,
started with the package's own launcher, ready when its OpenWire port accepts, stopped with
SIGTERM (then SIGKILL). ``make test`` installs the package."""

from __future__ import annotations

import atexit
import functools
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ports import free_port

HOME = Path("/usr/share/activemq")
PACKAGED_CONF = Path("/etc/activemq/instances-available/main")
READY_TIMEOUT_S = 90.0
JVM_HEAP = ("-Xms256M", "-Xmx512M")
"""The broker's heap: what bench/runtimes.py gives a bare JVM too, so that both compare."""
LOCKER_LOG4J = (
    "log4j.rootLogger=WARN, out\n"
    "log4j.logger.org.apache.activemq.store.SharedFileLocker=INFO\n"
    "log4j.logger.org.apache.activemq.broker.BrokerService=INFO\n"
    "log4j.appender.out=org.apache.log4j.ConsoleAppender\n"
    "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
    "log4j.appender.out.layout.ConversionPattern=%p %c{1} %m%n\n"
)
"""For a shared-store pair: the lock's wait and the broker's start, logged to out.log."""


@dataclass
class ActiveMQ:
    openwire_port: int
    stomp_port: int
    process: subprocess.Popen[bytes]
    base: Path
    ssl_port: int = 0
    """With ``ssl_keystore``: an ssl:// transport connector's port."""


def classpath() -> str:
    jars = sorted(str(p) for p in (HOME / "lib").glob("*.jar"))
    if not jars:
        raise RuntimeError("Debian's activemq package is not installed (make test installs it)")
    return ":".join(jars)


JAVA_SOURCES = Path(__file__).parent / "java"


@functools.cache
def java_classes() -> Path:
    """Every program in tests/java/, compiled by one javac for the whole run (a javac start
    costs seconds) into a directory removed at exit; ``java -cp {classpath()}:{this}``."""
    out = Path(tempfile.mkdtemp(prefix="dovecote-java-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    sources = sorted(str(p) for p in JAVA_SOURCES.glob("*.java"))
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", classpath(), *sources],
                   check=True, capture_output=True)  # fmt: skip
    return out


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def waits_for_lock(base: Path) -> bool:
    """The broker in ``base`` says it waits, as a slave, for its shared store's lock."""
    log = base / "out.log"
    return log.exists() and "now in slave mode" in log.read_text(errors="replace")


@contextmanager
def running_activemq(
    base: Path | None = None,
    openwire_port: int = 0,
    scheduler_support: bool = False,
    topic_pending_limit: int | None = None,
    ssl_keystore: tuple[Path, str] | None = None,
    plugins: str = "",
    network_connectors: str = "",
    policy_entries: str = "",
    kahadb: Path | None = None,
    standby: bool = False,
) -> Iterator[ActiveMQ]:
    """Start ActiveMQ; with ``base`` (kept afterwards) and a fixed port a test can kill it
    and start it again on the same store. ``scheduler_support`` turns on its scheduler
    (the ``schedulerSupport`` attribute of ``<broker>``, off in the packaged file);
    ``topic_pending_limit`` gives topics a constantPendingMessageLimitStrategy (ActiveMQ's
    distribution has one of 1000; the packaged file none); ``ssl_keystore`` (a PKCS#12
    file with the broker's key and certificate, and its password) adds an ssl://
    transport connector on a free port. ``plugins`` is XML put in ``<plugins>``, e.g. a
    simpleAuthenticationPlugin and an authorizationPlugin (tests/securitykit.py).
    ``network_connectors`` is XML put in ``<networkConnectors>`` (its ``<networkConnector>``
    elements). ``policy_entries`` is XML put first in ``<policyEntries>``. ``kahadb`` is
    a KahaDB directory two brokers may share (a shared-store master/slave pair; its lock is
    tried every second). ``standby``: the broker is one such pair's slave, which opens no
    port until it holds the lock, so it is ready once its log says it waits for the lock."""
    keep = base is not None
    base = base or Path(tempfile.mkdtemp(prefix="dovecote-amq-"))
    try:
        for item in PACKAGED_CONF.iterdir():
            shutil.copy(item, base / item.name)
        (base / "data").mkdir(exist_ok=True)
        openwire, stomp = openwire_port or free_port(), free_port()
        conf = base / "activemq.xml"
        xml = conf.read_text().replace(
            '<transportConnector name="openwire" uri="tcp://127.0.0.1:61616"/>',
            f'<transportConnector name="openwire" uri="tcp://127.0.0.1:{openwire}"/>\n'
            f'<transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp}"/>',
        )
        # Priority-ordered queues, as dovecote always dispatches them (compatibility C8), the
        # small memory limit the producer-window scenario relies on, and the statistics
        # plugin `dovecote dstat` asks (dovecote always has it).
        xml = xml.replace(
            "<persistenceAdapter>",
            f"<plugins><statisticsBrokerPlugin/>{plugins}</plugins>\n<destinationPolicy><policyMap><policyEntries>{policy_entries}"
            '<policyEntry queue="*.window" memoryLimit="64kb" producerFlowControl="true">'
            "<pendingQueuePolicy><vmQueueCursor/></pendingQueuePolicy></policyEntry>"
            '<policyEntry queue=">" prioritizedMessages="true"/>'
            "</policyEntries></policyMap></destinationPolicy>\n<persistenceAdapter>",
            1,
        )
        if network_connectors:
            xml = xml.replace(
                "<persistenceAdapter>",
                f"<networkConnectors>{network_connectors}</networkConnectors>\n"
                "<persistenceAdapter>",
                1,
            )
        if topic_pending_limit is not None:
            xml = xml.replace(
                "</policyEntries>",
                '<policyEntry topic=">"><pendingMessageLimitStrategy>'
                f'<constantPendingMessageLimitStrategy limit="{topic_pending_limit}"/>'
                "</pendingMessageLimitStrategy></policyEntry></policyEntries>",
                1,
            )
        logging: list[str] = []
        if kahadb is not None:
            # The package's log4j has no appender: the slave's wait must reach out.log.
            (base / "log4j.properties").write_text(LOCKER_LOG4J)
            logging.append(f"-Dlog4j.configuration=file:{base / 'log4j.properties'}")
            xml = xml.replace(
                '<kahaDB directory="${activemq.base}/data/kahadb"/>',
                f'<kahaDB directory="{kahadb}"><locker><shared-file-locker '
                'lockAcquireSleepInterval="1000"/></locker></kahaDB>',
                1,
            )
        if scheduler_support:
            xml = xml.replace("<broker ", '<broker schedulerSupport="true" ', 1)
        ssl_port = 0
        if ssl_keystore is not None:
            ssl_port = free_port()
            keystore, password = ssl_keystore
            xml = xml.replace(
                "<transportConnectors>",
                f'<sslContext><sslContext keyStore="file:{keystore}" keyStorePassword='
                f'"{password}" keyStoreType="pkcs12"/></sslContext>\n<transportConnectors>\n'
                f'<transportConnector name="ssl" uri="ssl://127.0.0.1:{ssl_port}"/>',
                1,
            )
        conf.write_text(xml)
        proc = subprocess.Popen(
            ["java", *JVM_HEAP, *logging, f"-Dactivemq.home={HOME}", f"-Dactivemq.base={base}",
             f"-Dactivemq.conf={base}", f"-Dactivemq.data={base / 'data'}",
             "-jar", str(HOME / "bin" / "activemq.jar"), "start", f"xbean:file:{conf}"],
            stdout=(base / "out.log").open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not (waits_for_lock(base) if standby else accepts(openwire)):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (base / "out.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"ActiveMQ did not start:\n{log}")
                time.sleep(0.1)
            yield ActiveMQ(openwire, stomp, proc, base, ssl_port)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
