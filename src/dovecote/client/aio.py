"""The asyncio face of the client (SPEC K1): the same engine as the sync API (one transport,
one consumer buffer, one ack policy); calls that may wait run in a worker thread so the
event loop never blocks.

    async with await AsyncConnectionFactory(url).create_connection() as connection:
        session = await connection.create_session()
        await session.create_producer(queue).send("hi")
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from dovecote.client.connection import (
    AckMode,
    Connection,
    ConnectionFactory,
    Message,
    MessageConsumer,
    MessageProducer,
    Session,
)
from dovecote.core.destinations import Destination


class AsyncConnectionFactory:
    def __init__(self, url: str = "tcp://127.0.0.1:61616") -> None:
        self._factory = ConnectionFactory(url)

    async def create_connection(
        self, user: str | None = None, password: str | None = None
    ) -> AsyncConnection:
        connection = await asyncio.to_thread(self._factory.create_connection, user, password)
        return AsyncConnection(connection)


class AsyncConnection:
    def __init__(self, connection: Connection) -> None:
        self.sync = connection

    async def create_session(
        self, transacted: bool = False, ack_mode: AckMode = AckMode.AUTO_ACKNOWLEDGE
    ) -> AsyncSession:
        session = await asyncio.to_thread(self.sync.create_session, transacted, ack_mode)
        return AsyncSession(session)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSession:
    def __init__(self, session: Session) -> None:
        self.sync = session
        self.queue = session.queue
        self.topic = session.topic

    async def create_producer(self, destination: Destination | None = None) -> AsyncProducer:
        return AsyncProducer(await asyncio.to_thread(self.sync.create_producer, destination))

    async def create_consumer(self, destination: Destination, selector: str | None = None,
                              prefetch: int | None = None) -> AsyncConsumer:  # fmt: skip
        consumer = await asyncio.to_thread(
            self.sync.create_consumer, destination, selector, prefetch
        )
        return AsyncConsumer(consumer)

    async def create_temporary_queue(self) -> Destination:
        return await asyncio.to_thread(self.sync.create_temporary_queue)

    async def commit(self) -> None:
        await asyncio.to_thread(self.sync.commit)

    async def rollback(self) -> None:
        await asyncio.to_thread(self.sync.rollback)


class AsyncProducer:
    def __init__(self, producer: MessageProducer) -> None:
        self.sync = producer

    async def send(self, message: Message | str | bytes, **options: Any) -> None:
        await asyncio.to_thread(self.sync.send, message, **options)


class AsyncConsumer:
    def __init__(self, consumer: MessageConsumer) -> None:
        self.sync = consumer

    async def receive(self, timeout: float | None = None) -> Message | None:
        return await asyncio.to_thread(self.sync.receive, timeout)

    def set_message_listener(self, listener: Callable[[Message], None]) -> None:
        self.sync.set_message_listener(listener)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)
