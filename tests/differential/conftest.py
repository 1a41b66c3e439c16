"""The differential suite: every scenario runs against dovecote and against a real ActiveMQ
5.17 with the same client, and its test compares what the two brokers showed the client
(the outcome each scenario returns), then checks ActiveMQ's outcome against what the test
expects, so that a scenario that sees nothing cannot pass by agreeing with itself.

Both brokers start once for the whole suite, each scenario on destinations of its own
(``Target.name``). ActiveMQ is configured as the other suites configure it: priority-ordered
queues (``prioritizedMessages``, dovecote's only ordering: a difference of defaults on
purpose, SPEC C8) and the statistics plugin.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from activemq import running_activemq
from brokers import running_broker
from differ import Peers, Target

T = TypeVar("T")

# dovecote configured as the ActiveMQ beside it: its defaults, and the pending limit on
# topics that ActiveMQ's distribution sets (a subscriber's own limit needs one); and the
# scheduler, on in both (SPEC D5: test_scheduler.py).
DOVECOTE_CONFIG = """
[broker]
scheduler_support = true

[[policy.entries]]
pattern = ">"
queues = false
pending_message_limit = 1000
"""


@pytest.fixture(scope="session")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peers]:
    with (
        running_activemq(scheduler_support=True, topic_pending_limit=1000) as amq,
        running_broker(DOVECOTE_CONFIG, workdir=tmp_path_factory.mktemp("differential")) as ours,
    ):
        yield Peers((ours.openwire_port, ours.stomp_port), (amq.openwire_port, amq.stomp_port))


Scenario = Callable[[Target], T]


@dataclass(frozen=True)
class Outcomes:
    activemq: Any
    dovecote: Any


@pytest.fixture
def differ(peers: Peers, request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``differ(scenario, expected=...)`` runs ``scenario(target)`` on ActiveMQ, then on
    dovecote, asserts that both returned the same outcome, and (when given) that it is
    ``expected``; it returns the outcome."""
    stem = f"diff.{request.node.name.split('[')[0].removeprefix('test_')}.{uuid.uuid4().hex[:6]}"

    def run(scenario: Scenario[T], expected: Any = None) -> T:
        outcomes = Outcomes(
            activemq=scenario(Target("activemq", *peers.activemq, f"{stem}.a")),
            dovecote=scenario(Target("dovecote", *peers.dovecote, f"{stem}.d")),
        )
        assert outcomes.dovecote == outcomes.activemq, (
            f"dovecote showed {outcomes.dovecote!r}, ActiveMQ {outcomes.activemq!r}"
        )
        if expected is not None:
            assert outcomes.activemq == expected, f"both brokers showed {outcomes.activemq!r}"
        return outcomes.activemq  # type: ignore[no-any-return]

    return run
