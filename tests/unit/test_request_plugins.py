"""Requests to the broker itself (a send with a reply-to to ActiveMQ.Statistics.* or
dovecote.Stream.*) are answered by plugins on the chain: with the plugin, the reply comes
and nothing is routed for the request; without it, the request is an ordinary message (as
in an ActiveMQ without statisticsBrokerPlugin). A plugin is asked only for a send with a
reply-to to one of its prefixes. A real broker on the memory store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from dovecote.app import make_plugins
from dovecote.broker.broker import Broker
from dovecote.broker.connection import ConnectionState
from dovecote.broker.plugins import BrokerPlugin
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.stats import StatisticsPlugin
from dovecote.broker.streams import StreamPlugin
from dovecote.config import load_config
from dovecote.core.commands import (
    ConnectionInfo,
    ConsumerInfo,
    MessageDispatch,
    SendMessage,
    SessionInfo,
)
from dovecote.core.destinations import Destination, queue
from dovecote.core.ids import ConnectionId, ConsumerId, SessionId
from dovecote.core.message import Message
from dovecote.protocol.openwire.primitives import decode_map
from dovecote.store.memory import MemoryPersistenceAdapter

CONNECTION = ConnectionId("ID:c")
SESSION = SessionId(CONNECTION, 1)
REPLIES = queue("replies")


class Asked(BrokerPlugin):
    request_prefixes: ClassVar[tuple[str, ...]] = ("ask.",)

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def on_request(self, state: ConnectionState, message: Message) -> None:
        self.asked.append(message.destination.name)


async def running(plugins: Sequence[BrokerPlugin]) -> tuple[Broker, list[MessageDispatch]]:
    broker = Broker(
        BrokerSettings(expire_messages_period_ms=0), MemoryPersistenceAdapter(), plugins=plugins
    )
    await broker.start()
    got: list[MessageDispatch] = []
    await broker.add_connection(ConnectionInfo(CONNECTION, "c"), got.append)
    await broker.process(CONNECTION, SessionInfo(SESSION))
    await broker.process(CONNECTION, ConsumerInfo(ConsumerId(SESSION, 1), REPLIES))
    return broker, got


@pytest.fixture
async def with_plugins() -> AsyncIterator[tuple[Broker, list[MessageDispatch]]]:
    broker, got = await running([StatisticsPlugin(), StreamPlugin()])
    yield broker, got
    await broker.stop()


@pytest.fixture
async def without_plugins() -> AsyncIterator[tuple[Broker, list[MessageDispatch]]]:
    broker, got = await running([])
    yield broker, got
    await broker.stop()


def request(n: int, to: Destination, reply_to: Destination | None = REPLIES) -> SendMessage:
    message = Message(f"ID:p:1:1:{n}", to, b"", reply_to=reply_to, correlation_id=f"r{n}")
    return SendMessage(message)


async def test_statistics_and_stream_requests_are_answered_by_their_plugins(
    with_plugins: tuple[Broker, list[MessageDispatch]],
) -> None:
    broker, got = with_plugins
    await broker.process(CONNECTION, request(1, queue("ActiveMQ.Statistics.Broker")))
    await broker.process(CONNECTION, request(2, queue("dovecote.Stream.Offsets.work")))
    answers = [d.message for d in got if d.message is not None]
    assert [m.correlation_id for m in answers] == ["r1", "r2"]
    assert decode_map(answers[0].body)["brokerName"] == "localhost"
    assert decode_map(answers[1].body) == {"end": 0, "count": 0, "bounds": "0,0"}
    # Nothing routed for the requests themselves (the stream request made its queue).
    names = {v.destination.name for v in broker.query.destinations()}
    assert names == {"replies", "work"}


async def test_without_the_plugins_a_request_is_an_ordinary_message(
    without_plugins: tuple[Broker, list[MessageDispatch]],
) -> None:
    broker, got = without_plugins
    await broker.process(CONNECTION, request(1, queue("ActiveMQ.Statistics.Broker")))
    assert [d for d in got if d.message is not None] == []
    [held] = broker.query.destinations(queue("ActiveMQ.Statistics.Broker"))
    assert held.size == 1


async def test_a_plugin_is_asked_only_for_requests_to_its_prefixes() -> None:
    asked = Asked()
    broker, _ = await running([asked])
    try:
        await broker.process(CONNECTION, request(1, queue("ask.a"), reply_to=None))
        await broker.process(CONNECTION, request(2, queue("other"), reply_to=REPLIES))
        await broker.process(CONNECTION, request(3, queue("ask.b")))
        assert asked.asked == ["ask.b"]
        sizes = {v.destination.name: v.size for v in broker.query.destinations()}
        assert sizes == {"ask.a": 1, "other": 1, "replies": 0}
    finally:
        await broker.stop()


def test_statistics_and_streams_are_on_by_default_and_can_be_turned_off(tmp_path: Path) -> None:
    def kinds(toml: str | None) -> set[type]:
        path = None
        if toml is not None:
            path = tmp_path / "dovecote.toml"
            path.write_text(toml)
        return {type(p) for p in make_plugins(load_config(path))}

    assert {StatisticsPlugin, StreamPlugin} <= kinds(None)
    off = kinds("[broker]\nstatistics = false\nstreams = false\n")
    assert not off & {StatisticsPlugin, StreamPlugin}
