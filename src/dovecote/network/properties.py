"""The accepting side of a duplex connector configures its bridge back from the remote's
BrokerInfo, as ActiveMQ's does: ``networkProperties`` holds the remote connector's
settings in java.util.Properties text (what ``NetworkConnectorSettings.network_properties``
writes, and ActiveMQ's bridge too): its TTLs, conduit and priority choices, prefetch and
destination lists. What it does not say keeps ActiveMQ's default."""

from __future__ import annotations

import re

from dovecote.network.settings import DestinationPattern, NetworkConnectorSettings, NetworkUri

_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")
_SPECIAL = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties text as Properties.store writes it (comments, ``key=value`` or
    ``key:value``, backslash escapes, UTF-16 ``\\uXXXX`` units); no continuation lines."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.lstrip()
        if not line or line[0] in "#!":
            continue
        key, value = _split(line)
        found[_unescape(key)] = _unescape(value.lstrip())
    return found


def _split(line: str) -> tuple[str, str]:
    escaped = False
    for i, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "=:":
            return line[:i].rstrip(), line[i + 1 :]
    return line, ""


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _SPECIAL.get(code, code)

    # (Surrogate pairs written as two \u units are joined back into one character.)
    joined = _ESCAPE.sub(one, text)
    return joined.encode("utf-16", "surrogatepass").decode("utf-16")


def patterns_of(text: str | None) -> tuple[DestinationPattern, ...]:
    """``[queue://a, topic://b.>]`` (no prefix: a queue, as ActiveMQ reads it)."""
    if not text or not (text.startswith("[") and text.endswith("]")):
        return ()
    found = []
    for item in text[1:-1].split(","):
        name = item.strip()
        if not name:
            continue
        queues = not name.startswith(("topic://", "temp-topic://"))
        found.append(DestinationPattern(name.split("://", 1)[-1], queues))
    return tuple(found)


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _bool(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() == "true"


def accepted_settings(network_properties: str | None, name: str) -> NetworkConnectorSettings:
    """The settings of a bridge back over an accepted duplex connection, named ``name``."""
    props = parse_properties(network_properties or "")
    ttl = _int(props.get("networkTTL"), 1)
    return NetworkConnectorSettings(
        name,
        NetworkUri("static", ()),
        network_ttl=ttl,
        message_ttl=_int(props.get("messageTTL"), ttl),
        consumer_ttl=_int(props.get("consumerTTL"), ttl),
        conduit_subscriptions=_bool(props.get("conduitSubscriptions"), True),
        decrease_network_consumer_priority=_bool(
            props.get("decreaseNetworkConsumerPriority"), False
        ),
        dynamic_only=_bool(props.get("dynamicOnly"), False),
        dynamically_included=patterns_of(props.get("dynamicallyIncludedDestinations")),
        excluded=patterns_of(props.get("excludedDestinations")),
        statically_included=patterns_of(props.get("staticallyIncludedDestinations")),
        prefetch_size=_int(props.get("prefetchSize"), 1000),
        sync_durable_subs=_bool(props.get("syncDurableSubs"), False),
    )
