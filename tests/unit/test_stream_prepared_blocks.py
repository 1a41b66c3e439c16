"""``Offsets`` with ``prepare`` (broker/prepared_blocks.py): a plan's parts encoded ahead are
what the ``Blocks`` requests for them send, and only while each part holds exactly the
messages they were made from; whatever changed a part meanwhile (a consumer taking or giving
back a message, a removal), its blocks are those of what it holds now. A real broker on the
memory store, driven in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from itertools import pairwise
from typing import Any

import pytest

from dovecote.broker.broker import Broker
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.streams import StreamPlugin
from dovecote.core.commands import (
    ConnectionInfo,
    ConsumerInfo,
    MessageDispatch,
    RemoveInfo,
    SendMessage,
    SessionInfo,
)
from dovecote.core.destinations import queue
from dovecote.core.ids import ConnectionId, ConsumerId, SessionId
from dovecote.core.message import Message
from dovecote.protocol.openwire.primitives import decode_map
from dovecote.store.memory import MemoryPersistenceAdapter

CONNECTION = ConnectionId("ID:c")
SESSION = SessionId(CONNECTION, 1)
REPLIES = queue("replies")
WORK = queue("work")
BLOCK = 1_000  # a few messages a block (the prepared size is set to it)


class Reader:
    """The broker, its stream plugin, and the answers to this connection's requests."""

    def __init__(self, broker: Broker, plugin: StreamPlugin, got: list[MessageDispatch]):
        self.broker, self.plugin, self.got = broker, plugin, got
        self.asked = 0

    async def ask(self, verb: str, **properties: Any) -> list[Message]:
        self.asked += 1
        request = Message(f"ID:p:1:1:{self.asked}", queue(f"dovecote.Stream.{verb}.work"), b"",
                          reply_to=REPLIES, correlation_id=f"r{self.asked}",
                          properties=properties)  # fmt: skip
        before = len(self.got)
        await self.broker.process(CONNECTION, SendMessage(request))
        answers = [d.message for d in self.got[before:] if d.message is not None]
        return [m for m in answers if m.correlation_id == f"r{self.asked}"]

    async def plan(self, after: int = 0, prepare: bool = True) -> list[int]:
        [answer] = await self.ask("Offsets", after=after, splits=2, prepare=prepare)
        bounds = [int(b) for b in str(decode_map(answer.body)["bounds"]).split(",")]
        await self.plugin.prepared.settled()
        return bounds

    async def blocks(self, after: int, up_to: int, block_bytes: int = BLOCK) -> list[bytes]:
        answers = await self.ask("Blocks", after=after, upTo=up_to, blockBytes=block_bytes)
        assert answers[-1].properties.get("dovecoteEnd") is True
        return [m.body for m in answers[:-1] if isinstance(m.body, bytes)]


@pytest.fixture
async def reader() -> AsyncIterator[Reader]:
    plugin = StreamPlugin()
    plugin.prepared.block_bytes = BLOCK
    broker = Broker(
        BrokerSettings(expire_messages_period_ms=0), MemoryPersistenceAdapter(), plugins=[plugin]
    )
    await broker.start()
    got: list[MessageDispatch] = []
    await broker.add_connection(ConnectionInfo(CONNECTION, "c"), got.append)
    await broker.process(CONNECTION, SessionInfo(SESSION))
    await broker.process(CONNECTION, ConsumerInfo(ConsumerId(SESSION, 1), REPLIES))
    for n in range(40):
        body = f"message {n} ".encode() * 20
        await broker.process(CONNECTION, SendMessage(Message(f"ID:p:2:1:{n}", WORK, body)))
    yield Reader(broker, plugin, got)
    await broker.stop()


def parts(bounds: list[int]) -> list[tuple[int, int]]:
    return list(pairwise(bounds))


async def test_a_plans_parts_are_sent_as_prepared_and_as_they_would_be_encoded(
    reader: Reader,
) -> None:
    bounds = await reader.plan()
    prepared = [await reader.blocks(a, b) for a, b in parts(bounds)]
    sent = sum(map(len, prepared))
    assert sent >= 8 and reader.plugin.prepared.used == sent
    assert reader.plugin.prepared.bytes == 0
    # Read again, nothing prepared: encoded on the spot, the same blocks.
    assert [await reader.blocks(a, b) for a, b in parts(bounds)] == prepared
    assert reader.plugin.prepared.used == sent


async def test_a_part_a_consumer_took_a_message_from_is_sent_as_it_is_now(reader: Reader) -> None:
    bounds = await reader.plan(prepare=False)
    before = [await reader.blocks(a, b) for a, b in parts(bounds)]
    await reader.plan()
    taker = ConsumerInfo(ConsumerId(SESSION, 2), WORK, prefetch_size=1, auto_ack=True)
    await reader.broker.process(CONNECTION, taker)
    await reader.broker.process(CONNECTION, RemoveInfo(taker.consumer_id))
    (a, b), (c, d) = parts(bounds)
    first, second = await reader.blocks(a, b), await reader.blocks(c, d)
    assert first != before[0] and second == before[1]
    assert reader.plugin.prepared.used == len(second) and reader.plugin.prepared.dropped > 0
    assert first == await reader.blocks(a, b)  # (encoded anew both times)


async def test_a_message_given_back_for_redelivery_is_sent_redelivered(reader: Reader) -> None:
    bounds = await reader.plan(prepare=False)
    before = [await reader.blocks(a, b) for a, b in parts(bounds)]
    await reader.plan()
    # A consumer is handed the first message and closes without acknowledging it: the
    # message is the same one, but it comes back marked redelivered.
    taker = ConsumerInfo(ConsumerId(SESSION, 2), WORK, prefetch_size=1)
    await reader.broker.process(CONNECTION, taker)
    dispatched = max(d.sequence for d in reader.got if d.consumer_id == taker.consumer_id)
    await reader.broker.process(CONNECTION, RemoveInfo(taker.consumer_id, dispatched))
    (a, b), (c, d) = parts(bounds)
    first, second = await reader.blocks(a, b), await reader.blocks(c, d)
    assert first != before[0] and second == before[1]
    assert len(first) == len(before[0])
    assert reader.plugin.prepared.used == len(second)


async def test_a_removal_drops_the_parts_it_reaches_and_a_new_plan_the_old_one(
    reader: Reader,
) -> None:
    bounds = await reader.plan()
    (a, b), (c, d) = parts(bounds)
    await reader.ask("Commit", upTo=a + 1)  # reaches the first part only
    assert await reader.blocks(a, b) != []
    assert reader.plugin.prepared.used == 0
    assert len(await reader.blocks(c, d)) == reader.plugin.prepared.used > 0
    used = reader.plugin.prepared.used
    await reader.plan(after=b)
    again = await reader.plan(after=b)  # the same plan again: made anew, the first dropped
    assert reader.plugin.prepared.dropped > 0
    for after, up_to in parts(again):
        await reader.blocks(after, up_to)
    assert reader.plugin.prepared.used > used
    assert reader.plugin.prepared.bytes == 0


async def test_a_plan_without_prepare_keeps_nothing(reader: Reader) -> None:
    bounds = await reader.plan(prepare=False)
    assert reader.plugin.prepared.bytes == 0
    for a, b in parts(bounds):
        await reader.blocks(a, b)
    assert reader.plugin.prepared.used == reader.plugin.prepared.dropped == 0


async def test_a_part_asked_for_in_blocks_of_another_size_is_cut_to_that_size(
    reader: Reader,
) -> None:
    bounds = await reader.plan()
    (a, b), _ = parts(bounds)
    larger = await reader.blocks(a, b, block_bytes=4 * BLOCK)
    assert reader.plugin.prepared.used == 0 and reader.plugin.prepared.dropped > 0
    assert larger == await reader.blocks(a, b, block_bytes=4 * BLOCK)
    assert len(larger) < len(await reader.blocks(a, b))
