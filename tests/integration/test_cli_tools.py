"""dovecote's command-line tools (SPEC O2) on the Python client, against dovecote and
against a real ActiveMQ 5.17: the counts they report are the counts that moved."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from activemq import running_activemq
from brokers import running_broker


@pytest.fixture(scope="module", params=["dovecote", "activemq"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "dovecote":
        with running_broker(workdir=tmp_path_factory.mktemp("tools")) as broker:
            yield f"tcp://127.0.0.1:{broker.openwire_port}"
    else:
        with running_activemq() as amq:
            yield f"tcp://127.0.0.1:{amq.openwire_port}"


def tool(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "dovecote", *args], capture_output=True,
                            text=True, timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_produce_browse_consume_purge(url: str) -> None:
    queue = f"queue://tools.{uuid.uuid4().hex[:8]}"
    # 300: ActiveMQ's browser shows at most maxBrowsePageSize (400) messages.
    assert "Produced: 300 messages" in tool("produce", queue, "--url", url, "--count", "300",
                                            "--size", "256", "--no-persistent")  # fmt: skip
    browsed = tool("browse", queue, "--url", url, "--limit", "3")
    assert "Browsed: 300 messages" in browsed
    assert len(browsed.strip().splitlines()) == 4  # three messages shown, then the count
    assert "Consumed: 100 messages" in tool("consume", queue, "--url", url, "--count", "100")
    assert "Purged: 200 messages" in tool("purge", queue, "--url", url)
    assert "Browsed: 0 messages" in tool("browse", queue, "--url", url)


def test_bad_url_option_is_named() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dovecote", "produce", "q", "--url", "tcp://127.0.0.1:1?jms.nope=1"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1 and "jms.nope" in result.stderr
