"""The broker's side of JMS semantics as the unmodified Java client 5.17 sees it
(tests/java/Observed.java): each scenario's outcome on dovecote must be ActiveMQ's."""

from __future__ import annotations

from pathlib import Path

import pytest

from differ import Peers, java_outcomes

SOURCE = Path(__file__).parent.parent / "java" / "Observed.java"

EXPECTED = {
    # Closing the session counts only the two messages its consumer was handed.
    "session_close_after_two_of_three": "m0:true:2,m1:true:2,m2:false:1",
    # Six rounds of receive-one-and-close: only m0 was ever handed out.
    "connection_close_rounds": "dead=[] left=m0:true:7,"
    + ",".join(f"m{i}:false:1" for i in range(1, 10)),
    "round_robin_sync_sends": "a=10 b=10 total=20",
    "new_groups_shared_out": "a=2 b=2 total=8",
    "slow_topic_subscriber_burst": "first=[m0, m1, m2, m3, m4] last=m999 at_most_15=true",
    # Bodies of 64 KiB and more (dovecote writes them beside their frames), then a small one.
    "large_bodies_whole": "0=bytes:307200:true,1=text:whole,2=map:true:7,3=text:small",
}


@pytest.fixture(scope="module")
def observed(peers: Peers) -> dict[str, dict[str, str]]:
    return java_outcomes(SOURCE, peers)


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_the_java_client_observes_the_same(
    observed: dict[str, dict[str, str]], scenario: str
) -> None:
    activemq, dovecote = observed["activemq"].get(scenario), observed["dovecote"].get(scenario)
    assert dovecote == activemq, f"dovecote: {dovecote}\nActiveMQ: {activemq}"
    if EXPECTED[scenario] is not None:
        assert activemq == EXPECTED[scenario]
