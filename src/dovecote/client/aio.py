"""The asyncio face of the client (compatibility K1): the same engine as the sync API (one
transport, one consumer buffer, one ack policy); calls that may wait run in a worker thread so the
event loop never blocks.

    async with await AsyncConnectionFactory(url).create_connection() as connection:
        await connection.start()
        session = await connection.create_session()
        await (await session.create_producer(queue)).send("hi")
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
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
from dovecote.client.destination_options import AnyDestination
from dovecote.client.transport import JMSError
from dovecote.core.destinations import Destination

Listener = Callable[[Message], None] | Callable[[Message], Awaitable[None]]


class AsyncConnectionFactory:
    def __init__(self, url: str = "tcp://127.0.0.1:61616") -> None:
        self._factory = ConnectionFactory(url)

    async def create_connection(
        self, user: str | None = None, password: str | None = None, client_id: str | None = None
    ) -> AsyncConnection:
        """A connection, stopped: nothing is delivered until ``await connection.start()``."""
        connection = await asyncio.to_thread(
            self._factory.create_connection, user, password, client_id
        )
        return AsyncConnection(connection)


class AsyncConnection:
    def __init__(self, connection: Connection) -> None:
        self.sync = connection

    async def create_session(
        self, transacted: bool = False, ack_mode: AckMode = AckMode.AUTO_ACKNOWLEDGE
    ) -> AsyncSession:
        session = await asyncio.to_thread(self.sync.create_session, transacted, ack_mode)
        return AsyncSession(session)

    async def start(self) -> None:
        await asyncio.to_thread(self.sync.start)

    def set_exception_listener(
        self, listener: Callable[[JMSError], None] | Callable[[JMSError], Awaitable[None]] | None
    ) -> None:
        """As Connection.set_exception_listener; a coroutine function runs on this loop."""
        if listener is None:
            self.sync.set_exception_listener(None)
            return
        loop = asyncio.get_running_loop()

        def relay(error: JMSError) -> None:
            if inspect.iscoroutinefunction(listener):
                asyncio.run_coroutine_threadsafe(listener(error), loop)
            else:
                loop.call_soon_threadsafe(listener, error)

        self.sync.set_exception_listener(relay)

    async def stop(self) -> None:
        """Waits, off the loop, for a listener call in progress to return."""
        await asyncio.to_thread(self.sync.stop)

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

    async def create_producer(self, destination: AnyDestination | None = None) -> AsyncProducer:
        return AsyncProducer(await asyncio.to_thread(self.sync.create_producer, destination))

    async def create_consumer(
        self,
        destination: AnyDestination,
        selector: str | None = None,
        prefetch: int | None = None,
        **options: Any,
    ) -> AsyncConsumer:
        """As Session.create_consumer: ``no_local``, ``exclusive``, ``priority``."""
        consumer = await asyncio.to_thread(
            self.sync.create_consumer, destination, selector, prefetch, **options
        )
        return AsyncConsumer(consumer)

    async def create_durable_subscriber(
        self, topic: AnyDestination, name: str, selector: str | None = None, no_local: bool = False
    ) -> AsyncConsumer:
        consumer = await asyncio.to_thread(
            self.sync.create_durable_subscriber, topic, name, selector, no_local
        )
        return AsyncConsumer(consumer)

    async def unsubscribe(self, name: str) -> None:
        await asyncio.to_thread(self.sync.unsubscribe, name)

    async def browse(
        self, destination: AnyDestination, selector: str | None = None
    ) -> list[Message]:
        """Every message now on the queue, none consumed."""
        return await asyncio.to_thread(lambda: list(self.sync.browse(destination, selector)))

    async def create_temporary_queue(self) -> Destination:
        return await asyncio.to_thread(self.sync.create_temporary_queue)

    async def create_temporary_topic(self) -> Destination:
        return await asyncio.to_thread(self.sync.create_temporary_topic)

    async def delete_temporary(self, destination: Destination) -> None:
        await asyncio.to_thread(self.sync.delete_temporary, destination)

    async def commit(self) -> None:
        await asyncio.to_thread(self.sync.commit)

    async def rollback(self) -> None:
        await asyncio.to_thread(self.sync.rollback)

    async def recover(self) -> None:
        await asyncio.to_thread(self.sync.recover)

    async def acknowledge(self) -> None:
        await asyncio.to_thread(self.sync.acknowledge)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)


class AsyncProducer:
    def __init__(self, producer: MessageProducer) -> None:
        self.sync = producer

    async def send(self, message: Message | str | bytes, **options: Any) -> None:
        await asyncio.to_thread(self.sync.send, message, **options)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)


class AsyncConsumer:
    def __init__(self, consumer: MessageConsumer) -> None:
        self.sync = consumer

    async def receive(self, timeout: float | None = None) -> Message | None:
        return await asyncio.to_thread(self.sync.receive, timeout)

    def set_message_listener(self, listener: Listener | None) -> None:
        """A plain function runs on the session's delivery thread; a coroutine function runs
        on the calling event loop, and the message is acknowledged (as the session's mode
        says) once it has finished. An exception in either is a failed delivery."""
        if listener is None or not inspect.iscoroutinefunction(listener):
            self.sync.set_message_listener(listener)  # type: ignore[arg-type]
            return
        loop = asyncio.get_running_loop()
        handler = listener

        def on_message(message: Message) -> None:
            asyncio.run_coroutine_threadsafe(handler(message), loop).result()

        self.sync.set_message_listener(on_message)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)
