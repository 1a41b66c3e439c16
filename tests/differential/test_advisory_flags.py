"""ActiveMQ's policy-flagged advisories, dovecote and ActiveMQ 5.17 side by side with the same
policies: what the unmodified Java client (tests/java/FlagAdvisories.java) gets on
ActiveMQ.Advisory.MessageDelivered / MessageConsumed / SlowConsumer / MessageDiscarded / FULL /
FastProducer for the same client steps. Each scenario's outcome on dovecote must be
ActiveMQ's; the flags are off by default (a broker without them has no such plugin, and a
queue outside the flagged pattern is told of by neither broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from differ import FLAG_POLICY, Peers, java_outcomes
from dovecote.app import make_plugins
from dovecote.broker.flag_advisories import FlagAdvisories
from dovecote.config import Config, load_config

SOURCE = Path(__file__).parent.parent / "java" / "FlagAdvisories.java"

ORIGIN = "originBrokerId, originBrokerName, originBrokerURL"
COPY = "ActiveMQTextMessage({dest} run={run} sameId=true body=null) type=Advisory persistent=false"

EXPECTED = {
    "delivered": (
        "ActiveMQ.Advisory.MessageDelivered.Queue.flag.dlv.R "
        + COPY.format(dest="queue://flag.dlv.R", run="q1")
        + f" [{ORIGIN}, orignalDestination=queue://flag.dlv.R:String, orignalMessageId]"
        " | ActiveMQ.Advisory.MessageDelivered.Topic.flag.dlvt.R "
        + COPY.format(dest="topic://flag.dlvt.R", run="t1")
        + f" [{ORIGIN}, orignalDestination=topic://flag.dlvt.R:String, orignalMessageId]"
    ),
    "consumed": "beforeAck=0 "
    + " | ".join(
        "ActiveMQ.Advisory.MessageConsumed.Queue.flag.con.R "
        + COPY.format(dest="queue://flag.con.R", run=run)
        + f" [{ORIGIN}, orignalDestination=queue://flag.con.R:String, orignalMessageId]"
        for run in ("c1", "c2")
    ),
    "consumed_in_transaction": "beforeCommit=0 "
    + " | ".join(
        "ActiveMQ.Advisory.MessageConsumed.Queue.flag.cont.R "
        + COPY.format(dest="queue://flag.cont.R", run=run)
        + f" [{ORIGIN}, orignalDestination=queue://flag.cont.R:String, orignalMessageId]"
        for run in ("x1", "x2")
    ),
    "slow_consumer": (
        "firstAt=22 ActiveMQ.Advisory.SlowConsumer.Topic.flag.slow.R ConsumerInfo("
        "topic://flag.slow.R prefetch=10 sameId=true) type=Advisory persistent=false"
        f" [consumerId, {ORIGIN}]"
    ),
    "slow_durable": (
        "firstAt=11 ActiveMQ.Advisory.SlowConsumer.Topic.flag.slowd.R ConsumerInfo("
        "topic://flag.slowd.R prefetch=10 sameId=true) type=Advisory persistent=false"
        f" [consumerId, {ORIGIN}]"
    ),
    "discarded": " | ".join(
        "ActiveMQ.Advisory.MessageDiscarded.Topic.flagd.disc.R "
        + COPY.format(dest="topic://flagd.disc.R", run=f"d{n}")
        + f" [consumerId, discardedCount={n - 1}:Integer, {ORIGIN},"
        " orignalDestination=topic://flagd.disc.R:String, orignalMessageId]"
        for n in (2, 3, 4)
    ),
    "full": (
        "blocked=true received=8 full=ActiveMQ.Advisory.FULL.Queue.flag.full.R null"
        f" type=Advisory persistent=false [{ORIGIN}, usageCount:Long,"
        " usageName=Main:memory:queue://flag.full.R:memory:String]"
        " fast=ActiveMQ.Advisory.FastProducer.Queue.flag.full.R"
        " ProducerInfo(queue://flag.full.R sameId=true) type=Advisory"
        f" persistent=false [{ORIGIN}, producerId]"
    ),
}


@pytest.fixture(scope="module")
def observed(peers: Peers) -> dict[str, dict[str, str]]:
    # The session's peers carry the flagged policies (FLAG_POLICY, FLAG_POLICY_XML).
    return java_outcomes(SOURCE, peers)


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_the_java_client_gets_the_same_flagged_advisories(
    observed: dict[str, dict[str, str]], scenario: str
) -> None:
    activemq, dovecote = observed["activemq"].get(scenario), observed["dovecote"].get(scenario)
    assert dovecote == activemq, f"dovecote: {dovecote}\nActiveMQ: {activemq}"
    assert activemq == EXPECTED[scenario]


def test_the_flags_are_off_by_default(tmp_path: Path) -> None:
    """No flag, no plugin (no message pays for these advisories); any one flag installs it."""
    assert not any(isinstance(p, FlagAdvisories) for p in make_plugins(Config()))
    (tmp_path / "flagged.toml").write_text(FLAG_POLICY)
    flagged = load_config(tmp_path / "flagged.toml")
    assert any(isinstance(p, FlagAdvisories) for p in make_plugins(flagged))
