"""The differential suite: every scenario runs against dovecote and against a real ActiveMQ
5.17 with the same client, and its test compares what the two brokers showed the client
(the outcome each scenario returns), then checks ActiveMQ's outcome against what the test
expects, so that a scenario that sees nothing cannot pass by agreeing with itself.

Both brokers start once for the whole run (``peers``, in tests/conftest.py), each scenario on
destinations of its own (``Target.name``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from differ import Peers, Target

T = TypeVar("T")

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
