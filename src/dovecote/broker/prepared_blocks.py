"""Stream blocks encoded ahead of the ``Blocks`` requests that will ask for them.

A Spark batch plans its range (``Offsets``), then writes its checkpoint while the broker has
nothing to do, and only then do its executors ask for their parts, each part's blocks encoded
on the broker's one loop while the reader waits. An ``Offsets`` request with ``prepare``
has the parts' blocks encoded in that pause instead, a block at a time between the loop's
other work, the first block of every part first. A ``Blocks`` request for a part takes them
only if the part still holds exactly the messages they were made from (the same message
objects, in the same order: nothing removed, added, redelivered or paged out meanwhile);
otherwise, and for whatever was not ready, its blocks are encoded as before.

What is kept is bounded: ``PREPARED_BYTES`` in all, the latest plan of each reader's
destination (subscription) only, each plan for ``PREPARED_FOR_S`` at most.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Awaitable, Callable, Hashable, Sequence
from itertools import pairwise
from typing import Final

from dovecote.broker.regions import log_failure
from dovecote.core.message import Message
from dovecote.core.stream_blocks import cut_blocks

PREPARED_BYTES: Final = 32 << 20
"""At most this many bytes of blocks kept ready, all plans together (a Spark batch of
25,000 1 KiB messages)."""
PREPARED_FOR_S: Final = 30.0
"""How long a plan's blocks wait for their requests (a query stopped after planning)."""

Fetch = Callable[[int, int], Awaitable[list[Message]]]
"""The messages a part (after, up_to] holds now, in order."""
Encode = Callable[[Sequence[Message]], bytes]


class _Part:
    __slots__ = ("bodies", "held", "runs")

    def __init__(self, held: list[Message], block_bytes: int) -> None:
        self.held = held
        self.runs = cut_blocks(held, block_bytes)
        self.bodies: list[bytes] = []


class _Plan:
    __slots__ = ("bytes", "expiry", "parts")

    def __init__(self) -> None:
        self.parts: dict[tuple[int, int], _Part] = {}
        self.bytes = 0
        self.expiry: asyncio.TimerHandle | None = None


class PreparedBlocks:
    def __init__(self, encode: Encode, block_bytes: int) -> None:
        self._encode = encode
        self.block_bytes = block_bytes
        """The block size prepared (a request asking for another size is encoded anew)."""
        self._plans: dict[Hashable, _Plan] = {}
        self.bytes = 0
        self.used = 0
        """Blocks sent as prepared, and (``dropped``) prepared but not sent: a part whose
        messages changed, a plan replaced, expired or removed by a commit."""
        self.dropped = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def prepare(self, reader: Hashable, bounds: list[int], fetch: Fetch) -> None:
        """Encode the parts cut by ``bounds`` ahead, in the background (a later plan of the
        same ``reader`` replaces this one)."""
        self.forget(reader)
        plan = self._plans[reader] = _Plan()
        loop = asyncio.get_running_loop()
        plan.expiry = loop.call_later(PREPARED_FOR_S, self._expire, reader, plan)
        task = loop.create_task(self._encode_ahead(reader, plan, bounds, fetch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(log_failure("encoding a plan's blocks ahead"))

    async def settled(self) -> None:
        """Until the blocks being prepared are (tests)."""
        while self._tasks:
            await asyncio.wait(self._tasks)

    async def _encode_ahead(
        self, reader: Hashable, plan: _Plan, bounds: list[int], fetch: Fetch
    ) -> None:
        await asyncio.sleep(0)  # (the plan's answer goes first)
        for after, up_to in pairwise(bounds):
            if up_to > after and self._plans.get(reader) is plan:
                plan.parts[(after, up_to)] = _Part(await fetch(after, up_to), self.block_bytes)
        rounds = max((len(part.runs) for part in plan.parts.values()), default=0)
        for i in range(rounds):
            for part in list(plan.parts.values()):
                if self._plans.get(reader) is not plan or self.bytes >= PREPARED_BYTES:
                    return
                if i < len(part.runs) and part in plan.parts.values():
                    body = self._encode(part.runs[i])
                    part.bodies.append(body)
                    plan.bytes += len(body)
                    self.bytes += len(body)
                    await asyncio.sleep(0)

    def take(
        self, reader: Hashable, after: int, up_to: int, held: list[Message], block_bytes: int
    ) -> tuple[list[Sequence[Message]], list[bytes]] | None:
        """The runs a ``Blocks`` request for (after, up_to] of blocks of ``block_bytes``
        sends and the bodies of those ready, first to last, if that part was prepared from
        exactly ``held`` in blocks of that size; else None (and the part is dropped)."""
        plan = self._plans.get(reader)
        part = plan.parts.pop((after, up_to), None) if plan is not None else None
        if plan is None or part is None:
            return None
        self._release(plan, part)
        same = len(part.held) == len(held) and all(map(operator.is_, part.held, held))
        if not same or block_bytes != self.block_bytes:
            self.dropped += len(part.bodies)
            return None
        self.used += len(part.bodies)
        return part.runs, part.bodies

    def forget(self, reader: Hashable) -> None:
        """Drop what was prepared for ``reader`` (a new plan)."""
        plan = self._plans.pop(reader, None)
        if plan is not None:
            self._drop(plan)

    def forget_through(self, reader: Hashable, up_to: int) -> None:
        """Drop the parts ``reader``'s removal through ``up_to`` reached (a Spark batch
        removes the last one once the next is planned: that plan's parts stay)."""
        plan = self._plans.get(reader)
        if plan is None:
            return
        for span in [span for span in plan.parts if span[0] < up_to]:
            part = plan.parts.pop(span)
            self._release(plan, part)
            self.dropped += len(part.bodies)

    def _release(self, plan: _Plan, part: _Part) -> None:
        """A part taken out of its plan: its blocks' bytes no longer count as kept."""
        size = sum(map(len, part.bodies))
        plan.bytes -= size
        self.bytes -= size

    def _expire(self, reader: Hashable, plan: _Plan) -> None:
        if self._plans.get(reader) is plan:
            del self._plans[reader]
            self._drop(plan)

    def _drop(self, plan: _Plan) -> None:
        if plan.expiry is not None:
            plan.expiry.cancel()
        self.dropped += sum(len(part.bodies) for part in plan.parts.values())
        self.bytes -= plan.bytes
        plan.bytes = 0
        plan.parts.clear()
