"""Options named with a destination, as the Java client reads them:
``orders?consumer.prefetchSize=0&consumer.exclusive=true`` is the queue ``orders`` for the
broker, and ConsumerInfo settings for the consumers created on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from dovecote.client.transport import JMSError
from dovecote.core.destinations import Destination, DestinationType

CONSUMER_OPTIONS = {
    "prefetchSize": int, "maximumPendingMessageLimit": int, "dispatchAsync": bool,
    "selector": str, "noLocal": bool, "exclusive": bool, "retroactive": bool, "priority": int,
}  # fmt: skip
"""The ConsumerInfo fields a destination's ``consumer.*`` options may set."""


@dataclass(frozen=True)
class OptionedDestination:
    """A destination named with options, ``orders?consumer.prefetchSize=0``: the options
    are the client's, for the consumers created on it; the broker sees ``destination``."""

    destination: Destination
    options: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, kind: DestinationType, text: str) -> Destination | OptionedDestination:
        name, mark, query = text.partition("?")
        destination = Destination(kind, name)
        if not mark:
            return destination
        return cls(destination, tuple(parse_qsl(query, keep_blank_values=True)))

    @property
    def name(self) -> str:
        return self.destination.name

    @property
    def type(self) -> DestinationType:
        return self.destination.type


AnyDestination = Destination | OptionedDestination


def connection_consumer_settings(options: Any, exclusive: bool | None) -> dict[str, Any]:
    """What the connection's ``jms.*`` options (a ConnectionOptions) put in every consumer's
    ConsumerInfo, as ActiveMQMessageConsumer takes them from its connection (and session)
    before the destination's ``consumer.*`` options; ``exclusive`` given wins."""
    return {
        "exclusive": options.exclusiveConsumer if exclusive is None else exclusive,
        "retroactive": options.useRetroactiveConsumer,
        "dispatchAsync": options.dispatchAsync,
        "maximumPendingMessageLimit": options.prefetchPolicy.maximumPendingMessageLimit,
    }  # fmt: skip


def split_options(destination: AnyDestination) -> tuple[Destination, dict[str, str]]:
    """The destination the broker sees, and the options named with it."""
    if isinstance(destination, OptionedDestination):
        return destination.destination, dict(destination.options)
    return destination, {}


def _option_value(kind: type, text: str) -> Any:
    if kind is bool:
        return text.lower() == "true"
    return kind(text)


def consumer_settings(options: dict[str, str]) -> dict[str, Any]:
    """The ConsumerInfo fields the ``consumer.*`` options set (other prefixes are for other
    objects, ignored here as Java does); an unknown or bad one refuses the consumer."""
    settings: dict[str, Any] = {}
    unknown = {}
    for key, text in options.items():
        if not key.startswith("consumer."):
            continue
        name = key.removeprefix("consumer.")
        kind = CONSUMER_OPTIONS.get(name)
        if kind is None:
            unknown[name] = text
            continue
        try:
            settings[name] = _option_value(kind, text)
        except ValueError:
            unknown[name] = text
    if unknown:
        raise JMSError(
            "org.apache.activemq.ConfigurationException",
            f"There are {len(unknown)} consumer options that couldn't be set on the "
            f"consumer. Check the options are spelled correctly. Unknown parameters="
            f"{unknown}. This consumer cannot be started.",
        )
    return settings
