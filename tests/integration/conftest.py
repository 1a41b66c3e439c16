"""What the client suites share: ``broker_url``, each test run once against dovecote and
once against a real ActiveMQ 5.17 (the ``peers`` started once for the whole run)."""

from __future__ import annotations

import pytest

from differ import Peers


@pytest.fixture(scope="session", params=["dovecote", "activemq"])
def broker_url(request: pytest.FixtureRequest, peers: Peers) -> str:
    openwire_port, _ = peers.dovecote if request.param == "dovecote" else peers.activemq
    return f"tcp://127.0.0.1:{openwire_port}"
