"""Broker URL options side by side with ActiveMQ's Java client 5.17: one table of URLs, run
through tests/java/UrlOptions.java (ActiveMQConnectionFactory: create, start, a session)
and through dovecote's client (ConnectionFactory, create_connection, start), both against
the same running ActiveMQ; each URL must be accepted by both or refused by both, and a
refusal by dovecote is an OptionError naming the option."""

from __future__ import annotations

import subprocess

import pytest

from activemq import classpath, java_classes
from differ import Peers
from dovecote.client import ConnectionFactory, OptionError

# (URL with {H} for host:port, the option dovecote must name when refusing it, or None)
TABLE: list[tuple[str, str | None]] = [
    # TcpTransport's properties, without a prefix; "transport." is the broker's prefix
    ("tcp://{H}?tcpNoDelay=true", None),
    ("tcp://{H}?tcpNoDelay=yes", None),  # Boolean.valueOf: false, no error
    ("tcp://{H}?soTimeout=2000", None),
    ("tcp://{H}?connectionTimeout=5000", None),
    ("tcp://{H}?keepAlive=true", None),
    ("tcp://{H}?soLinger=0", None),
    ("tcp://{H}?socketBufferSize=131072", None),
    ("tcp://{H}?ioBufferSize=16384", None),
    ("tcp://{H}?daemon=true", None),
    ("tcp://{H}?trace=true", None),
    ("tcp://{H}?useLocalHost=false", None),
    ("tcp://{H}?closeAsync=false&minmumWireFormatVersion=1", None),
    ("tcp://{H}?diffServ=EF", None),
    ("tcp://{H}?diffServ=XYZ", "diffServ"),
    ("tcp://{H}?typeOfService=300", "typeOfService"),
    ("tcp://{H}?transport.tcpNoDelay=true", "transport.tcpNoDelay"),
    ("tcp://{H}?transport.soTimeout=1000", "transport.soTimeout"),
    ("tcp://{H}?soTimeout=abc", "soTimeout"),
    ("tcp://{H}?soTimeout=1.5", "soTimeout"),
    ("tcp://{H}?connectionTimeout=99999999999", "connectionTimeout"),
    ("tcp://{H}?bogus=1", "bogus"),
    ("tcp://{H}?transportListener=x", "transportListener"),
    ("tcp://{H}?socket.tcpNoDelay=true&socket.receiveBufferSize=65536", None),
    ("tcp://{H}?socket.bogus=1", "socket.bogus"),
    # the inactivity monitor's, the negotiator's, the write-timeout filter's, auto.*
    ("tcp://{H}?useInactivityMonitor=false", None),
    ("tcp://{H}?useInactivityMonitor=false&readCheckTime=5000", "readCheckTime"),
    ("tcp://{H}?readCheckTime=5000&initialDelayTime=1000&keepAliveResponseRequired=true", None),
    ("tcp://{H}?negotiateTimeout=5000", None),
    ("tcp://{H}?soWriteTimeout=5000", None),
    ("tcp://{H}?soWriteTimeout=soon", "soWriteTimeout"),
    ("tcp://{H}?auto.protocols=openwire", None),
    # OpenWireFormatFactory's
    ("tcp://{H}?wireFormat.maxInactivityDuration=5000", None),
    ("tcp://{H}?wireFormat.maxInactivityDurationInitalDelay=2000", None),
    ("tcp://{H}?wireFormat.tightEncodingEnabled=true&wireFormat.cacheEnabled=false", None),
    ("tcp://{H}?wireFormat.stackTraceEnabled=true&wireFormat.maxFrameSize=1048576", None),
    ("tcp://{H}?wireFormat.bogus=1", "wireFormat.bogus"),
    ("tcp://{H}?wireFormat.maxInactivityDuration=x", "wireFormat.maxInactivityDuration"),
    # ActiveMQConnectionFactory's and its policies'
    ("tcp://{H}?jms.useCompression=true&jms.copyMessageOnSend=false", None),
    ("tcp://{H}?jms.nestedMapAndListEnabled=false&jms.clientIDPrefix=app", None),
    ("tcp://{H}?jms.connectionIDPrefix=c&jms.exclusiveConsumer=true", None),
    ("tcp://{H}?jms.optimizeAcknowledgeTimeOut=500&jms.sendTimeout=1000", None),
    ("tcp://{H}?jms.maxThreadPoolSize=10&jms.watchTopicAdvisories=false", None),
    ("tcp://{H}?jms.prefetchPolicy.all=5", None),
    ("tcp://{H}?jms.prefetchPolicy.queuePrefetch=0", None),
    ("tcp://{H}?jms.prefetchPolicy.bogus=1", "jms.prefetchPolicy.bogus"),
    ("tcp://{H}?jms.prefetchPolicy.queuePrefetch=ten", "jms.prefetchPolicy.queuePrefetch"),
    ("tcp://{H}?jms.prefetchPolicy=5", "jms.prefetchPolicy"),
    ("tcp://{H}?jms.redeliveryPolicy.maximumRedeliveries=2", None),
    ("tcp://{H}?jms.redeliveryPolicy.backOffMultiplier=2.5&jms.redeliveryPolicy.queue=a", None),
    ("tcp://{H}?jms.redeliveryPolicy.collisionAvoidancePercent=40000",
     "jms.redeliveryPolicy.collisionAvoidancePercent"),
    ("tcp://{H}?jms.blobTransferPolicy.uploadUrl=http://example.org/", None),
    ("tcp://{H}?jms.blobTransferPolicy.bufferSize=x", "jms.blobTransferPolicy.bufferSize"),
    ("tcp://{H}?jms.useAsyncSnd=true", "jms.useAsyncSnd"),
    ("tcp://{H}?jms.useAsyncSend=true&jms.bogus=1", "jms.bogus"),
    ("tcp://{H}?jms.transportListener=x", "jms.transportListener"),
    ("tcp://{H}?jms.trustedPackages=[com.example,org.example]", None),
    ("tcp://{H}?jms.trustedPackages=com.example", "jms.trustedPackages"),
    ("nio://{H}?tcpNoDelay=true", None),
    # FailoverTransport's, nested.* for every member, jms.* on failover's own options only
    ("failover:(tcp://{H})?randomize=false", None),
    ("failover:(tcp://{H})?timeout=3000&maxReconnectAttempts=2", None),
    ("failover:(tcp://{H})?priorityBackup=true", None),
    ("failover:(tcp://{H})?backup=true&backupPoolSize=1", None),
    ("failover:(tcp://{H})?initialReconnectDelay=20&maxReconnectDelay=100"
     "&useExponentialBackOff=false&reconnectDelayExponent=1.5", None),
    ("failover:(tcp://{H})?startupMaxReconnectAttempts=2&trackMessages=true", None),
    ("failover:(tcp://{H})?maxCacheSize=1024&updateURIsSupported=false", None),
    ("failover:(tcp://{H})?backOffMultiplier=2", "backOffMultiplier"),
    ("failover:(tcp://{H})?bogus=1", "bogus"),
    ("failover:(tcp://{H})?soTimeout=1000", "soTimeout"),
    ("failover:(tcp://{H})?wireFormat.maxInactivityDuration=5000",
     "wireFormat.maxInactivityDuration"),
    ("failover:(tcp://{H})?nested.soTimeout=1000", None),
    ("failover:(tcp://{H})?nested.wireFormat.maxInactivityDuration=5000", None),
    ("failover:(tcp://{H})?nested.bogus=1", "bogus"),
    ("failover:(tcp://{H}?soTimeout=1000,tcp://{H})", None),
    ("failover:(tcp://{H}?bogus=1)", "bogus"),
    ("failover:(tcp://{H}?jms.useAsyncSend=true)", "jms.useAsyncSend"),
    ("failover:(tcp://{H}?auto.protocols=openwire)", "auto.protocols"),
    ("failover:(tcp://{H})?jms.useAsyncSend=true&jms.prefetchPolicy.all=0", None),
]  # fmt: skip


@pytest.fixture(scope="module")
def activemq(peers: Peers) -> int:
    """The session's ActiveMQ: the Java client only connects to it and closes."""
    return peers.activemq[0]


@pytest.fixture(scope="module")
def java_verdicts(activemq: int) -> dict[str, str]:
    urls = [url.replace("{H}", f"127.0.0.1:{activemq}") for url, _ in TABLE]
    result = subprocess.run(
        ["java", "-cp", f"{classpath()}:{java_classes()}", "UrlOptions"],
        input="\n".join(urls) + "\n",
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    verdicts = {}
    for line in result.stdout.splitlines():
        verdict, url, *reason = line.split("\t")
        verdicts[url] = verdict if not reason else f"{verdict}: {reason[0]}"
    assert len(verdicts) == len(TABLE), f"{result.stdout}\n{result.stderr[-3000:]}"
    return verdicts


def dovecote_verdict(url: str) -> tuple[str, str]:
    try:
        connection = ConnectionFactory(url).create_connection()
    except OptionError as exc:
        return "REFUSED", str(exc)
    try:
        connection.start()
        connection.create_session()
    finally:
        connection.close()
    return "ACCEPTED", ""


@pytest.mark.parametrize(("url", "named"), TABLE, ids=[url for url, _ in TABLE])
def test_dovecote_accepts_and_refuses_as_the_java_client(
    java_verdicts: dict[str, str], activemq: int, url: str, named: str | None
) -> None:
    url = url.replace("{H}", f"127.0.0.1:{activemq}")
    java = java_verdicts[url]
    ours, reason = dovecote_verdict(url)
    assert ours == java.split(":")[0], f"Java: {java}; dovecote: {ours} {reason}"
    # The table says what the test expects, so a run where both refuse everything fails.
    assert (named is None) == (ours == "ACCEPTED"), f"Java: {java}; dovecote: {ours} {reason}"
    if named is not None:
        assert named in reason, reason
