"""A duplex connector's settings travel in its BrokerInfo as java.util.Properties text
(networkProperties): what dovecote writes reads back the same, and ActiveMQ's text (as its
Properties.store writes it: a comment, escaped colons) reads as ActiveMQ means it."""

from __future__ import annotations

from dovecote.network.properties import accepted_settings, parse_properties
from dovecote.network.settings import DestinationPattern, NetworkConnectorSettings, NetworkUri


def test_our_settings_read_back_the_same() -> None:
    ours = NetworkConnectorSettings(
        "east:1 = west", NetworkUri("static", ()), duplex=True, message_ttl=3, consumer_ttl=2,
        conduit_subscriptions=False, decrease_network_consumer_priority=True,
        dynamic_only=True, prefetch_size=10,
        excluded=(DestinationPattern("x.>", True), DestinationPattern("t.*", False)),
        dynamically_included=(DestinationPattern("orders.>", True),),
    )  # fmt: skip
    text = ours.network_properties("é😀 b")
    assert parse_properties(text)["brokerName"] == "é😀 b"
    assert parse_properties(text)["name"] == "east:1 = west"
    back = accepted_settings(text, "duplex-east")
    assert back.name == "duplex-east"
    assert (back.message_ttl, back.consumer_ttl, back.prefetch_size) == (3, 2, 10)
    assert not back.conduit_subscriptions and back.decrease_network_consumer_priority
    assert back.dynamic_only
    assert back.excluded == ours.excluded
    assert back.dynamically_included == ours.dynamically_included


def test_activemq_text_and_defaults() -> None:
    text = (
        "#\n#Wed Nov 25 20:40:25 UTC 2026\nname=to-dovecote\nduplex=true\nmessageTTL=2\n"
        "excludedDestinations=[queue\\://a.>, topic\\://b, c]\nconduitSubscriptions=true\n"
    )
    settings = accepted_settings(text, "duplex-amq")
    assert settings.message_ttl == 2 and settings.consumer_ttl == 1
    assert settings.excluded == (
        DestinationPattern("a.>", True), DestinationPattern("b", False),
        DestinationPattern("c", True),
    )  # fmt: skip
    assert accepted_settings(None, "x") == NetworkConnectorSettings("x", NetworkUri("static", ()))
