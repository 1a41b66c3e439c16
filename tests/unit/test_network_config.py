"""[[network_connectors]]: ActiveMQ's networkConnector attributes in snake_case, their
defaults (the TTLs follow network_ttl), the URIs, the destination lists, the reconnect
back-off, and bad entries refused with the key that is wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dovecote.config import Config, ConfigError, load_config, network_settings
from dovecote.core.destinations import queue, topic
from dovecote.network.settings import (
    Backoff,
    DestinationPattern,
    NetworkUriError,
    RemoteAddress,
    parse_network_uri,
)


def loaded(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "dovecote.toml"
    path.write_text(text)
    return load_config(path)


def test_a_connector_with_activemq_s_defaults(tmp_path: Path) -> None:
    config = loaded(tmp_path, '[[network_connectors]]\nuri = "static:(tcp://127.0.0.1:61617)"\n')
    [s] = network_settings(config)
    assert s.name == "bridge" and s.uri.kind == "static"
    assert s.uri.addresses == (RemoteAddress("127.0.0.1", 61617),)
    assert (s.network_ttl, s.message_ttl, s.consumer_ttl) == (1, 1, 1)
    assert s.conduit_subscriptions and not s.duplex and not s.decrease_network_consumer_priority
    assert s.prefetch_size == 1000 and s.replay_when_no_consumers
    assert s.backoff.delays() == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]


def test_every_key(tmp_path: Path) -> None:
    config = loaded(
        tmp_path,
        """
        [[network_connectors]]
        name = "to-east"
        uri = "masterslave:(tcp://m:61616,tcp://s:61616)"
        network_ttl = 3
        consumer_ttl = 1
        conduit_subscriptions = false
        decrease_network_consumer_priority = true
        dynamically_included_destinations = [{ queue = "orders.>" }, { topic = "prices.*" }]
        excluded_destinations = [{ queue = "orders.secret" }]
        statically_included_destinations = [{ queue = "audit" }]
        prefetch_size = 10
        user = "bridge"
        password = "secret"
        initial_reconnect_delay_ms = 100
        max_reconnect_delay_ms = 500
        """,
    )
    [s] = network_settings(config)
    assert s.uri.kind == "masterslave" and [a.host for a in s.uri.addresses] == ["m", "s"]
    assert (s.network_ttl, s.message_ttl, s.consumer_ttl) == (3, 3, 1)
    assert s.statically_included == (DestinationPattern("audit", True),)
    assert s.wants(queue("orders.new")) and s.wants(topic("prices.eur"))
    assert not s.wants(queue("orders.secret")), "excluded wins"
    assert not s.wants(topic("orders.new")) and not s.wants(queue("other"))
    assert (s.user, s.password, s.prefetch_size) == ("bridge", "secret", 10)
    assert s.backoff.delays() == [0.1, 0.2, 0.4, 0.5]


def test_without_exponential_back_off_the_delay_stays() -> None:
    assert Backoff(1000, 30_000, 2.0, exponential=False).delays() == [1.0]


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("tcp://a:1", "is not a network connector URI"),
        ("static:(tcp://a)", "is not tcp://host:port"),
        ("static:(ssl://a:1)", "is not tcp://host:port"),
        ("multicast://default", "is not a network connector URI"),
    ],
)
def test_bad_uris(uri: str, problem: str) -> None:
    with pytest.raises(NetworkUriError, match=problem):
        parse_network_uri(uri)


def test_uri_forms() -> None:
    parsed = parse_network_uri("static://(tcp://a:1, nio://[::1]:2)?useExponentialBackOff=false")
    assert parsed.addresses == (RemoteAddress("a", 1), RemoteAddress("::1", 2))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('uri = "static:(tcp://a)"', "network_connectors.0.uri: 'tcp://a' in"),
        ('uri = "static:(tcp://a:1)"\nexcluded_destinations = [{}]',
         "network_connectors.0.excluded_destinations.0: give either queue or topic"),
        ('uri = "static:(tcp://a:1)"\nnetwork_ttl = 0', "network_connectors.0.network_ttl"),
        ('uri = "static:(tcp://a:1)"\nduplx = true', "network_connectors.0.duplx: unknown key"),
        ('name = "x"', "network_connectors.0: Object missing required field `uri`"),
    ],
)  # fmt: skip
def test_bad_entries_name_their_key(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        loaded(tmp_path, f"[[network_connectors]]\n{text}\n")


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("document", "after"), [("docs/networks.md", "## Configuration"), ("README.md", "## Networks")]
)
def test_the_documented_examples_load(tmp_path: Path, document: str, after: str) -> None:
    text = (ROOT / document).read_text().split(after, 1)[1]
    example = re.split(r"```toml(?: network)?\n", text, maxsplit=1)[1].split("```", 1)[0]
    [s] = network_settings(loaded(tmp_path, example))
    assert s.uri.kind == "static" and s.name.startswith("east-to-west")
