"""The broker's stream requests (offset-based reading, compatibility X1) over the Python client and
a real broker process: plans, non-destructive ranges, commits, sequence numbers that keep
increasing across a restart, durable topic subscriptions, and clear errors."""

from __future__ import annotations

import uuid
from itertools import pairwise
from pathlib import Path

import pytest

from brokers import running_broker
from dovecote.client import ConnectionFactory, JMSError, Message
from dovecote.client.message import AckMode
from dovecote.client.streams import SEQUENCE, StreamClient
from dovecote.core.destinations import queue, topic
from dovecote.core.stream_blocks import HEADER


def send(url: str, destination: object, bodies: list[str], persistent: bool = True) -> None:
    with ConnectionFactory(url).create_connection() as connection:
        producer = connection.create_session().create_producer(destination)  # type: ignore[arg-type]
        for body in bodies:
            producer.send(Message(body), persistent=persistent)


def test_plan_read_commit_and_restart(tmp_path: Path) -> None:
    name = queue(f"stream.{uuid.uuid4().hex[:8]}")
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        send(url, name, [f"m{i}" for i in range(10)])
        with StreamClient(url, name) as stream:
            plan = stream.plan(after=0, max_messages=6, splits=2)
            assert plan.count == 6 and len(plan.bounds) == 3
            parts = [list(stream.read(lo, hi)) for lo, hi in pairwise(plan.bounds)]
            assert [len(p) for p in parts] == [3, 3]
            bodies = [m.body for p in parts for m in p]
            assert bodies == [f"m{i}" for i in range(6)]
            sequences = [m.properties[SEQUENCE] for p in parts for m in p]
            assert sequences == sorted(sequences) and sequences[-1] == plan.end
            # Reading is not consuming: the same range again, the same messages.
            again = [m.body for m in stream.read(plan.bounds[0], plan.end)]
            assert again == bodies
            assert stream.commit(plan.end) == 6
            assert stream.plan(after=0).count == 4
            last_before_restart = stream.plan(after=plan.end).end
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        send(url, name, ["after restart"])
        with StreamClient(url, name) as stream:
            rest = list(stream.read(plan.end, 2**62))
            assert [m.body for m in rest] == ["m6", "m7", "m8", "m9", "after restart"]
            recovered = [m.properties[SEQUENCE] for m in rest]
            assert recovered[3] == last_before_restart  # stored with the message
            assert recovered[4] > last_before_restart  # and never reused
            assert stream.commit(recovered[-1]) == 5
            assert stream.plan(after=0).count == 0


def test_plans_and_ranges_hold_what_a_consumer_has_in_flight_in_sequence_order(
    tmp_path: Path,
) -> None:
    """A consumer holding the first messages unacknowledged (and a later one sent at a
    higher priority, dispatched first): plans count them and ranges give them, in the
    broker's sequence order, among those still waiting."""
    name = queue(f"stream.{uuid.uuid4().hex[:8]}")
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        send(url, name, [f"m{i}" for i in range(6)])
        with ConnectionFactory(url).create_connection() as connection:
            connection.start()
            session = connection.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
            session.create_producer(name).send(Message("urgent"), priority=9)
            holder = session.create_consumer(name, prefetch=3)
            held = [holder.receive(5) for _ in range(3)]
            assert [m.body for m in held if m is not None] == ["urgent", "m0", "m1"]
            with StreamClient(url, name) as stream:
                everything = stream.plan(after=0)
                assert everything.count == 7
                first = stream.plan(after=0, max_messages=4, splits=2)
                assert first.count == 4
                read = [m.body for lo, hi in pairwise(first.bounds) for m in stream.read(lo, hi)]
                assert read == ["m0", "m1", "m2", "m3"]
                rest = [m.body for m in stream.read(first.end, everything.end)]
                assert rest == ["m4", "m5", "urgent"]
                assert stream.plan(after=first.end).count == 3


def block_counts(blocks: list[bytes]) -> list[int]:
    return [HEADER.unpack_from(block)[1] for block in blocks]


def test_a_plan_prepared_ahead_is_read_as_its_parts_hold_then(tmp_path: Path) -> None:
    """Offsets with prepare (the Spark source's plans): over a real socket, each part's
    blocks are those of what it holds when it is read, whether a consumer took a message
    from it after the plan (the first part) or nothing touched it (the second), byte for
    byte what a read that nothing was prepared for gives."""
    name = queue(f"stream.{uuid.uuid4().hex[:8]}")
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        send(url, name, [f"m{i}" * 200 for i in range(40)])
        with StreamClient(url, name) as stream:
            plan = stream.plan(after=0, max_messages=30, splits=2, prepare=True)
            with ConnectionFactory(url).create_connection() as connection:
                connection.start()
                taker = connection.create_session().create_consumer(name, prefetch=1)
                assert taker.receive(5) is not None  # m0, acknowledged: gone
            (a, b), (c, d) = pairwise(plan.bounds)
            first, second = stream.read_blocks(a, b), stream.read_blocks(c, d)
            assert block_counts(first) == [14] and block_counts(second) == [15]
            # Read again, nothing prepared any more: encoded on the spot, the same bytes.
            assert first == stream.read_blocks(a, b)
            assert second == stream.read_blocks(c, d)


def test_a_topic_through_a_durable_subscription(tmp_path: Path) -> None:
    news = topic(f"news.{uuid.uuid4().hex[:8]}")
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with StreamClient(url, news, "spark-app", "reader") as stream:
            assert stream.plan(after=0).count == 0  # creates the subscription
            send(url, news, ["a", "b", "c"])
            plan = stream.plan(after=0)
            assert [m.body for m in stream.read(0, plan.end)] == ["a", "b", "c"]
            assert stream.commit(plan.end) == 3
            assert stream.plan(after=plan.end).count == 0


def test_errors_are_answered_and_named(tmp_path: Path) -> None:
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}"
        with pytest.raises(ValueError, match="client id"):
            StreamClient(url, topic("t"))
        with StreamClient(url, queue("q")) as stream:
            with pytest.raises(JMSError, match="'upTo'"):
                list(stream._ask("Range", after=0))
            with pytest.raises(JMSError, match="unknown stream request 'Nope'"):
                stream._map("Nope")
            with pytest.raises(JMSError, match="not a number"):
                stream._map("Offsets", after="soon")
            assert stream.plan(after=0).count == 0  # the connection still serves


def test_stream_requests_from_stomp(tmp_path: Path) -> None:
    """The extension from a STOMP client (stomp.py over a real socket): numbers arrive as
    header strings, and the answer's entries come back as headers too."""
    from stompclient import Client

    with running_broker(workdir=tmp_path) as broker, Client(broker.stomp_address) as client:
        for i in range(4):
            client.send("/queue/from.stomp", f"s{i}", persistent="true")
        client.subscribe("/temp-queue/plans")
        client.send("/queue/dovecote.Stream.Offsets.from.stomp", "", reply__to="/temp-queue/plans",
                    after="0", maxMessages="3", splits="3")  # fmt: skip
        plan = client.receive().headers
        assert plan["count"] == "3"
        bounds = plan["bounds"].split(",")
        assert len(bounds) == 4 and bounds[-1] == plan["end"]
        client.send("/queue/dovecote.Stream.Range.from.stomp", "", reply__to="/temp-queue/plans",
                    after="0", upTo=plan["end"])  # fmt: skip
        copies = client.receive_n(4)  # three messages, then the end marker
        assert [c.body for c in copies[:3]] == ["s0", "s1", "s2"]
        assert copies[3].headers["dovecoteEnd"] == "true"
        client.send("/queue/dovecote.Stream.Offsets.from.stomp", "", reply__to="/temp-queue/plans",
                    after="soon")  # fmt: skip
        assert "not a number" in client.receive().headers["error"]
