"""The connections' stream (transport/stream.py) over real loopback sockets, on asyncio's
loop and on uvloop (the broker's): reads hand over what arrived in order, joined up to the
size asked and split beyond it (chunk reads: as it arrived, grouped up to the size, never
split); reading pauses while too much waits unread and resumes once
read; the end of the stream reads empty; a broken connection fails reads and drains; drain
waits for a reader that is behind."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable

import pytest
import uvloop

from dovecote.transport.stream import Stream

Scenario = Callable[[Stream, socket.socket], Awaitable[None]]
LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def run(scenario: Scenario, loop: str, limit: int = 64 * 1024) -> None:
    """Serve one connection with a Stream; ``scenario`` gets it and the client's socket."""

    async def main() -> None:
        accepted: asyncio.Queue[Stream] = asyncio.Queue()
        done = asyncio.Event()

        async def on_connected(stream: Stream) -> None:
            await accepted.put(stream)
            await done.wait()

        loop_ = asyncio.get_running_loop()
        server = await loop_.create_server(
            lambda: Stream(on_connected, limit),  # type: ignore[arg-type,return-value]
            "127.0.0.1",
            0,
        )
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        client.setblocking(False)
        try:
            stream = await asyncio.wait_for(accepted.get(), 10)
            await asyncio.wait_for(scenario(stream, client), 30)
        finally:
            done.set()
            client.close()
            server.close()
            await server.wait_closed()

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.run(main())


async def read_exactly(
    stream: Stream, size: int, chunk: int = 1 << 20, by_chunks: bool = False
) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < size:
        data = await stream.read_chunks(chunk) if by_chunks else [await stream.read(chunk)]
        assert data and data[0], "the stream ended early"
        parts.extend(data)
        got += sum(map(len, data))
    return b"".join(parts)


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.001)


@pytest.mark.parametrize("loop", LOOPS)
def test_reads_join_what_arrived_up_to_the_size_asked_and_split_beyond(loop: str) -> None:
    async def scenario(stream: Stream, client: socket.socket) -> None:
        for part in (b"one ", b"two ", b"three"):
            client.send(part)
            await until(lambda: stream._buffered > 0)
            await asyncio.sleep(0.01)
        assert await stream.read(100) == b"one two three"
        client.send(b"0123456789")
        assert await stream.read(4) == b"0123"
        assert await stream.read(4) == b"4567"
        assert await stream.read(100) == b"89"

    run(scenario, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_chunks_come_as_they_arrived_grouped_up_to_the_size_never_split(loop: str) -> None:
    async def scenario(stream: Stream, client: socket.socket) -> None:
        for part in (b"one ", b"two ", b"three"):
            client.send(part)
            await until(lambda: len(stream._chunks) > 0)
            await asyncio.sleep(0.01)
        assert await stream.read_chunks(8) == [b"one ", b"two "]  # "three" would pass 8
        assert await stream.read_chunks(8) == [b"three"]
        client.send(b"0123456789")
        await until(lambda: stream._buffered > 0)
        assert await stream.read_chunks(4) == [b"0123456789"]  # a chunk stays whole
        assert stream._buffered == 0
        client.shutdown(socket.SHUT_WR)
        assert await stream.read_chunks(4) == []
        assert await stream.read_chunks(4) == []

    run(scenario, loop)


@pytest.mark.parametrize("by_chunks", [False, True], ids=["read", "read_chunks"])
@pytest.mark.parametrize("loop", LOOPS)
def test_reading_pauses_while_too_much_waits_unread_and_nothing_is_lost(
    loop: str, by_chunks: bool
) -> None:
    limit = 16 * 1024
    # 32 MiB, numbered in order: more than the kernel's socket buffers hold.
    sent = b"".join(struct.pack(">I", i) for i in range(8 * 1024 * 1024))

    async def scenario(stream: Stream, client: socket.socket) -> None:
        loop_ = asyncio.get_running_loop()
        sending = loop_.create_task(loop_.sock_sendall(client, sent))
        await until(lambda: stream._buffered > limit)
        assert not stream.transport.is_reading()  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)
        assert not sending.done()  # held back by the paused reading, not buffered whole
        assert stream._buffered <= limit + 256 * 1024  # at most one socket read beyond
        assert await read_exactly(stream, len(sent), limit, by_chunks) == sent
        await sending
        assert stream.transport.is_reading()  # type: ignore[attr-defined]

    run(scenario, loop, limit)


@pytest.mark.parametrize("loop", LOOPS)
def test_the_end_of_the_stream_reads_empty_after_the_data(loop: str) -> None:
    async def scenario(stream: Stream, client: socket.socket) -> None:
        client.send(b"last words")
        client.shutdown(socket.SHUT_WR)
        assert await read_exactly(stream, 10) == b"last words"
        assert await stream.read(100) == b""
        assert await stream.read(100) == b""
        stream.write(b"still writable")  # a half-closed peer can still be answered
        await stream.drain()
        answer = await asyncio.get_running_loop().sock_recv(client, 100)
        assert answer == b"still writable"

    run(scenario, loop)


@pytest.mark.parametrize("by_chunks", [False, True], ids=["read", "read_chunks"])
@pytest.mark.parametrize("loop", LOOPS)
def test_a_broken_connection_fails_reads_and_drains(loop: str, by_chunks: bool) -> None:
    async def scenario(stream: Stream, client: socket.socket) -> None:
        # A reset, not a clean close: linger 0 sends RST.
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        with pytest.raises(ConnectionError):
            await (stream.read_chunks(100) if by_chunks else stream.read(100))
        await stream.wait_closed()
        with pytest.raises(ConnectionResetError):
            await stream.drain()

    run(scenario, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_drain_waits_while_the_peer_is_behind(loop: str) -> None:
    async def scenario(stream: Stream, client: socket.socket) -> None:
        loop_ = asyncio.get_running_loop()
        stream.transport.set_write_buffer_limits(high=16 * 1024)
        chunk = bytes(range(256)) * 256  # 64 KiB
        written = 0
        while stream.transport.get_write_buffer_size() <= 16 * 1024:  # the kernel's is full
            stream.write(chunk)
            written += len(chunk)
        draining = loop_.create_task(stream.drain())
        await asyncio.sleep(0.05)
        assert not draining.done()  # the client has read nothing yet
        got = 0
        while got < written:
            data = await loop_.sock_recv(client, 1 << 16)
            assert data
            got += len(data)
        await draining  # done once the client caught up

    run(scenario, loop)
