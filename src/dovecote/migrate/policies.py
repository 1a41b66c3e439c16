"""<destinationPolicy> as [[policy.entries]]: ActiveMQ picks the most specific entry that
matches a destination, dovecote the first, so the entries are written most specific first."""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from typing import Any

from dovecote.core.destinations import has_wildcard, wildcard_matches
from dovecote.migrate.context import Conversion
from dovecote.migrate.tomlout import Parse, Scalar
from dovecote.migrate.xmlread import children, local, parse_bool, parse_int, parse_size

_FLAGS: dict[str, tuple[str, Parse]] = {
    "producerFlowControl": ("producer_flow_control", parse_bool),
    "memoryLimit": ("memory_limit", parse_size),
    "queuePrefetch": ("queue_prefetch", parse_int),
    "queueBrowserPrefetch": ("queue_browser_prefetch", parse_int),
    "topicPrefetch": ("topic_prefetch", parse_int),
    "durableTopicPrefetch": ("durable_topic_prefetch", parse_int),
}
_DLQ_OPTIONS: dict[str, tuple[str, Parse]] = {
    "queuePrefix": ("queue_prefix", str),
    "topicPrefix": ("topic_prefix", str),
    "useQueueForQueueMessages": ("use_queue_for_queue_messages", parse_bool),
    "useQueueForTopicMessages": ("use_queue_for_topic_messages", parse_bool),
    "processExpired": ("process_expired", parse_bool),
    "processNonPersistent": ("process_non_persistent", parse_bool),
}
_CURSORS = {"storeCursor": "store", "vmQueueCursor": "vm"}


class _Entry:
    """One policyEntry for one pattern: the keys it gives, in dovecote's words."""

    def __init__(self, element: ET.Element, pattern: str, queues: bool, default: bool) -> None:
        self.element, self.pattern, self.queues, self.default = element, pattern, queues, default
        self.keys: list[tuple[str, Any, ET.Element, str | None]] = []


def convert_policies(conv: Conversion, broker: ET.Element) -> None:
    entries: list[_Entry] = []
    defaults: list[_Entry] = []
    expiry: list[tuple[int, ET.Element]] = []
    for wrapper in children(broker, "destinationPolicy"):
        conv.use(wrapper)
        for policy_map in children(wrapper, "policyMap"):
            conv.use(policy_map)
            for group in children(policy_map):
                conv.use(group)
                default = local(group.tag) == "defaultEntry"
                for element in children(group, "policyEntry"):
                    found = _read_entry(conv, element, default, expiry)
                    (defaults if default else entries).extend(found)
    ordered = sorted((e for e in entries if e.queues), key=functools.cmp_to_key(_specific_first))
    ordered += sorted(
        (e for e in entries if not e.queues), key=functools.cmp_to_key(_specific_first)
    )
    # The default entry applies where no entry matches: last, for what no ">" covers already.
    ordered += [
        d for d in defaults if not any(e.pattern == ">" and e.queues == d.queues for e in entries)
    ]
    for entry in ordered:
        table = conv.array_table("policy.entries")
        conv.put(table, "pattern", entry.pattern, entry.element, None)
        conv.put(table, "queues", entry.queues, entry.element, None, comment="")
        for key, value, element, attr in entry.keys:
            conv.put(table, key, value, element, attr)
    _expiry(conv, expiry)


def _specific_first(a: _Entry, b: _Entry) -> int:
    """ActiveMQ 5.17's order (DestinationMap.chooseValue): an exact name before a pattern, a
    pattern before a wider one that covers it, otherwise by name."""
    if a.pattern == b.pattern:
        return 0
    if has_wildcard(a.pattern) and wildcard_matches(a.pattern, b.pattern):
        return 1
    if has_wildcard(b.pattern) and wildcard_matches(b.pattern, a.pattern):
        return -1
    return -1 if a.pattern < b.pattern else 1


def _read_entry(
    conv: Conversion, element: ET.Element, default: bool, expiry: list[tuple[int, ET.Element]]
) -> list[_Entry]:
    conv.use(element)
    targets: list[tuple[str, bool]] = []
    for attr, queues in (("queue", True), ("topic", False)):
        if attr in element.attrib:
            names = conv.text(element, attr)
            targets += [(n.strip(), queues) for n in (names or "").split(",") if n.strip()]
    for attr in ("tempQueue", "tempTopic"):
        if attr in element.attrib:
            conv.leftover(element, None, "dovecote's policies do not cover temporary destinations")
            return []
    if not targets:
        if not default:
            conv.leftover(element, None, "a policy entry with no queue or topic")
            return []
        targets = [(">", True), (">", False)]  # defaultEntry: every destination
    keys: list[tuple[str, Any, ET.Element, str | None]] = []
    for attr, (key, parse) in _FLAGS.items():
        if attr in element.attrib and (value := conv.typed(element, attr, parse)) is not None:
            keys.append((key, value, element, attr))
    if "expireMessagesPeriod" in element.attrib:
        period = conv.typed(element, "expireMessagesPeriod", parse_int)
        if period is not None:
            expiry.append((period, element))
    if element.get("cursorMemoryHighWaterMark", "").strip() == "70":
        conv.same_as(element, "cursorMemoryHighWaterMark", "dovecote's store cursor pages at 70%")
    for child in children(element):
        _child(conv, element, child, keys)
    entries = []
    for pattern, queues in targets:
        entry = _Entry(element, pattern, queues, default)
        entry.keys = [k for k in keys if queues or k[0] != "pending_queue_cursor"]
        entries.append(entry)
    return entries


def _child(
    conv: Conversion,
    entry: ET.Element,
    child: ET.Element,
    keys: list[tuple[str, Any, ET.Element, str | None]],
) -> None:
    name = local(child.tag)
    inner = children(child)
    if name == "deadLetterStrategy" and inner:
        conv.use(child)
        _dead_letter(conv, inner[0], keys)
    elif name == "pendingMessageLimitStrategy" and inner:
        conv.use(child)
        strategy = inner[0]
        if local(strategy.tag) != "constantPendingMessageLimitStrategy":
            conv.leftover(strategy, None, "dovecote has constantPendingMessageLimitStrategy only")
        elif (limit := conv.typed(strategy, "limit", parse_int)) is not None:
            conv.use(strategy)
            keys.append(("pending_message_limit", limit, strategy, "limit"))
    elif name == "pendingQueuePolicy" and inner:
        conv.use(child)
        cursor = _CURSORS.get(local(inner[0].tag))
        if cursor is None:
            conv.leftover(inner[0], None, "dovecote has storeCursor and vmQueueCursor")
        else:
            conv.use(inner[0])
            keys.append(("pending_queue_cursor", cursor, inner[0], None))
    elif name == "networkBridgeFilterFactory" and inner:
        conv.use(child)
        factory = inner[0]
        if local(factory.tag) == "conditionalNetworkBridgeFilterFactory":
            conv.use(factory)
            if factory.get("replayWhenNoConsumers", "").lower() == "true":
                conv.same_as(
                    factory,
                    "replayWhenNoConsumers",
                    "dovecote's network connectors replay by default",
                )


def _dead_letter(
    conv: Conversion, strategy: ET.Element, keys: list[tuple[str, Any, ET.Element, str | None]]
) -> None:
    kind = local(strategy.tag)
    if kind not in ("individualDeadLetterStrategy", "sharedDeadLetterStrategy"):
        conv.leftover(
            strategy, None, "dovecote has the individual and shared strategies (shared kept)"
        )
        return
    conv.use(strategy)
    keys.append(
        ("dead_letter", "individual" if kind.startswith("individual") else "shared", strategy, None)
    )
    options: dict[str, Scalar] = {}
    for attr, (key, parse) in _DLQ_OPTIONS.items():
        if attr in strategy.attrib:
            if kind.startswith("shared") and key.endswith("prefix"):
                continue  # not a shared strategy's: swept as unknown
            value = conv.typed(strategy, attr, parse)
            if value is not None:
                options[key] = value
    for wrapper in children(strategy, "deadLetterQueue"):
        conv.use(wrapper)
        for queue in children(wrapper):
            if local(queue.tag) == "queue" and (name := conv.text(queue, "physicalName")):
                conv.use(queue)
                options["shared_queue"] = name
            else:
                conv.leftover(queue, None, "dovecote's shared dead letter destination is a queue")
    if options:
        keys.append(("dead_letter_options", options, strategy, None))


def _expiry(conv: Conversion, expiry: list[tuple[int, ET.Element]]) -> None:
    """expireMessagesPeriod is per entry in ActiveMQ, broker-wide in dovecote: carried when
    every entry that sets it agrees."""
    periods = {period for period, _ in expiry}
    if len(periods) == 1:
        period, element = expiry[0]
        lines = ", ".join(str(conv.line(e)) for _, e in expiry)
        conv.put(
            conv.table("policy"),
            "expire_messages_period_ms",
            period,
            element,
            comment=f"expireMessagesPeriod of the policy entries at lines {lines} "
            "(broker-wide in dovecote)",
        )
    elif periods:
        for _, element in expiry:
            conv.leftover(
                element, "expireMessagesPeriod", "broker-wide in dovecote, and the entries disagree"
            )
