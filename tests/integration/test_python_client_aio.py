"""The asyncio API's surface over the same engine as the sync one, against dovecote and a
real ActiveMQ: start/stop, browse, recover, session close, temporary topics, coroutine
listeners, durable subscribers."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from dovecote.client import AckMode, Message
from dovecote.client.aio import AsyncConnectionFactory

NO_DELAY = "jms.redeliveryPolicy.initialRedeliveryDelay=0"


@pytest.fixture
def name() -> str:
    return f"aio.{uuid.uuid4().hex[:10]}"


async def test_start_stop_browse_recover_and_session_close(broker_url: str, name: str) -> None:
    factory = AsyncConnectionFactory(f"{broker_url}?{NO_DELAY}")
    async with await factory.create_connection() as conn:
        session = await conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(name)
        producer = await session.create_producer(queue)
        await producer.send("m0")
        consumer = await session.create_consumer(queue)
        assert await consumer.receive(0.3) is None  # not started
        assert await session.browse(queue) == []  # a browser sees nothing either
        await conn.start()
        assert [m.body for m in await session.browse(queue)] == ["m0"]
        first = await consumer.receive(5)
        await session.recover()
        again = await consumer.receive(5)
        assert first is not None and not first.redelivered
        assert again is not None and (again.redelivered, again.delivery_count) == (True, 2)
        await session.close()  # unacked: back on the queue, redelivered
        other = await conn.create_session()
        back = await (await other.create_consumer(queue)).receive(5)
        assert back is not None and back.body == "m0" and back.redelivered


async def test_coroutine_listener_and_stop(broker_url: str, name: str) -> None:
    async with await AsyncConnectionFactory(broker_url).create_connection() as conn:
        await conn.start()
        session = await conn.create_session()
        queue = session.queue(name)
        got: asyncio.Queue[str] = asyncio.Queue()

        async def on_message(message: Message) -> None:
            await got.put(str(message.body))

        (await session.create_consumer(queue)).set_message_listener(on_message)
        producer = await (await conn.create_session()).create_producer(queue)
        await producer.send("m0")
        assert await asyncio.wait_for(got.get(), 10) == "m0"
        await conn.stop()
        await producer.send("m1")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(got.get(), 0.5)
        await conn.start()
        assert await asyncio.wait_for(got.get(), 10) == "m1"


async def test_temporary_topic_and_durable_subscriber(broker_url: str, name: str) -> None:
    factory = AsyncConnectionFactory(broker_url)
    async with await factory.create_connection(client_id=name) as conn:
        await conn.start()
        session = await conn.create_session()
        temp = await session.create_temporary_topic()
        subscriber = await session.create_consumer(temp)
        await (await session.create_producer(temp)).send("to the temporary topic")
        got = await subscriber.receive(5)
        assert got is not None and got.body == "to the temporary topic"
        topic = session.topic(name)
        durable = await session.create_durable_subscriber(topic, "sub")
        await durable.close()
        await (await session.create_producer(topic)).send("while away")
        durable = await session.create_durable_subscriber(topic, "sub")
        kept = await durable.receive(5)
        assert kept is not None and kept.body == "while away"
        await durable.close()
        await session.unsubscribe("sub")
        await session.delete_temporary(temp)
