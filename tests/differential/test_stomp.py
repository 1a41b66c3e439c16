"""STOMP clients (stomp.py) side by side: selectors over string headers, destination
options in names, and a slow topic subscriber under a burst."""

from __future__ import annotations

import queue

import pytest

from differ import Target
from stompclient import Client


def drain(client: Client, quiet_s: float = 0.5) -> list:  # type: ignore[type-arg]
    """What arrives until nothing more has for ``quiet_s`` (ActiveMQ dispatches after the
    receipt of the send that caused it, so a receipt round trip is no barrier there)."""
    got = []
    while True:
        try:
            got.append(client.receive(timeout=quiet_s))
        except queue.Empty:
            return got


HEADERS = [{"n": "5"}, {"n": "0"}, {"n": "2.5"}, {"n": "abc"}, {"n": "3000000000"}, {}]


def matched_by(selector: str):  # type: ignore[no-untyped-def]
    def scenario(target: Target) -> list[str]:
        with Client(target.stomp_address) as client:
            client.subscribe(f"/queue/{target.name}", selector=selector)
            for i, headers in enumerate(HEADERS):
                client.send(f"/queue/{target.name}", f"m{i}", **headers)
            return [m.headers.get("n", "-") for m in drain(client)]

    return scenario


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("n > 1", ["5"]),  # "2.5" is no Integer; 3000000000 past an Integer's range
        ("n = 5", ["5"]),
        ("n <> 5", ["0", "2.5", "abc", "3000000000"]),
        ("n > 2.0", ["5", "2.5", "3000000000"]),
        ("n BETWEEN 0 AND 9", ["5", "0"]),
        ("n = '5'", ["5"]),
    ],
)
def test_selectors_read_numeric_string_headers_as_numbers(
    differ, selector: str, expected: list[str]
) -> None:
    differ(matched_by(selector), expected)


def options_in_names(target: Target) -> list[tuple[str, str]]:
    """Options after a "?" are no part of the destination: sent to ``X?...`` arrives on X."""
    with Client(target.stomp_address) as client:
        client.subscribe(f"/queue/{target.name}")
        client.subscribe(f"/queue/{target.name}.b?consumer.prefetchSize=1")
        client.send(f"/queue/{target.name}?consumer.prefetchSize=0", "to the plain name")
        client.send(f"/queue/{target.name}.b", "to the name subscribed with options")
        got = drain(client)
        return sorted(
            (m.headers["destination"].replace(target.name, "NAME"), str(m.body)) for m in got
        )


def test_options_in_a_destination_name_are_stripped(differ) -> None:
    differ(
        options_in_names,
        [
            ("/queue/NAME", "to the plain name"),
            ("/queue/NAME.b", "to the name subscribed with options"),
        ],
    )


def slow_topic_subscriber(target: Target) -> dict[str, object]:
    """Prefetch 5, a pending limit of 10, and a burst of 1,000 the subscriber does not
    read until it is over: the window's five come first, then the newest ten. (Subscribed
    without a receipt: ActiveMQ then gives the subscription its prefetch at once.)"""
    with Client(target.stomp_address) as slow, Client(target.stomp_address) as producer:
        slow.subscribe(
            f"/topic/{target.name}",
            ack="client-individual",
            receipt=False,
            **{"activemq.prefetchSize": "5", "activemq.maximumPendingMessageLimit": "10"},
        )
        for i in range(1000):
            producer.send(f"/topic/{target.name}", f"m{i}", receipt=False)
        producer.sync()
        got = []
        while True:
            try:
                message = slow.receive(timeout=0.5)
            except queue.Empty:
                break
            got.append(str(message.body))
            slow.ack(message)
        return {"first": got[:5], "last": got[-1], "count": len(got)}


def test_a_slow_topic_subscriber_keeps_its_window_and_the_newest(differ) -> None:
    differ(
        slow_topic_subscriber,
        {"first": ["m0", "m1", "m2", "m3", "m4"], "last": "m999", "count": 15},
    )


def bare_destination(target: Target) -> list[tuple[str, str]]:
    """A destination with no /queue/ or /topic/ before it: ActiveMQ's STOMP takes it as a
    queue of that name."""
    with Client(target.stomp_address) as client:
        client.subscribe(f"/queue/{target.name}")
        client.send(target.name, "bare")
        return [
            (m.headers["destination"].replace(target.name, "NAME"), str(m.body))
            for m in drain(client)
        ]


def test_a_destination_without_a_prefix_is_a_queue(differ) -> None:
    differ(bare_destination, [("/queue/NAME", "bare")])
