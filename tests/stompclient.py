"""A thin test wrapper over stomp.py (unmodified, from PyPI): a listener that queues what
arrives so tests wait on a queue with a timeout, never on sleeps."""

from __future__ import annotations

import contextlib
import itertools
import queue
import uuid
from dataclasses import dataclass, field
from typing import Any

import stomp
from stomp.utils import Frame

WAIT_S = 10.0
DISCONNECT_WAIT_S = 5.0


@dataclass
class Received:
    headers: dict[str, str]
    body: str | bytes

    @property
    def id(self) -> str:
        return self.headers["message-id"]


@dataclass
class Collector(stomp.ConnectionListener):  # type: ignore[misc]
    messages: queue.Queue[Received] = field(default_factory=queue.Queue)
    errors: queue.Queue[Received] = field(default_factory=queue.Queue)
    receipts: queue.Queue[str] = field(default_factory=queue.Queue)
    disconnected: queue.Queue[bool] = field(default_factory=queue.Queue)

    def on_message(self, frame: Frame) -> None:
        self.messages.put(Received(dict(frame.headers), frame.body))

    def on_error(self, frame: Frame) -> None:
        self.errors.put(Received(dict(frame.headers), frame.body))

    def on_receipt(self, frame: Frame) -> None:
        self.receipts.put(frame.headers["receipt-id"])

    def on_disconnected(self) -> None:
        self.disconnected.put(True)


class Client:
    """One STOMP connection (1.2 unless asked) with helpers that wait for what they expect."""

    _ids = itertools.count(1)

    def __init__(
        self,
        address: tuple[str, int],
        version: str = "1.2",
        client_id: str | None = None,
        heartbeats: tuple[int, int] = (0, 0),
        auto_decode: bool = True,
        auto_content_length: bool = True,
    ) -> None:
        classes = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}
        kwargs: dict[str, Any] = {
            "auto_decode": auto_decode,
            "auto_content_length": auto_content_length,
        }
        if version != "1.0":
            kwargs["heartbeats"] = heartbeats
        self.version = version
        self.conn = classes[version]([address], **kwargs)
        self.listener = Collector()
        self.conn.set_listener("collector", self.listener)
        headers = {"client-id": client_id} if client_id else {}
        self.conn.connect(wait=True, headers=headers)

    def send(
        self, destination: str, body: str | bytes = "", receipt: bool = True, **headers: Any
    ) -> None:
        """Send; with ``receipt`` wait until the broker confirms it."""
        hdrs = {k.replace("__", "-").replace("_", "."): str(v) for k, v in headers.items()}
        if receipt:
            rid = f"r-{uuid.uuid4().hex}"
            hdrs["receipt"] = rid
            self.conn.send(destination, body, headers=hdrs)
            self.wait_receipt(rid)
        else:
            self.conn.send(destination, body, headers=hdrs)

    def send_raw(self, destination: str, body: str | bytes, headers: dict[str, str]) -> None:
        rid = f"r-{uuid.uuid4().hex}"
        self.conn.send(destination, body, headers={**headers, "receipt": rid})
        self.wait_receipt(rid)

    def wait_receipt(self, receipt_id: str) -> None:
        got = self.listener.receipts.get(timeout=WAIT_S)
        assert got == receipt_id, f"expected receipt {receipt_id}, got {got}"

    def subscribe(
        self,
        destination: str,
        ack: str = "auto",
        sub_id: str | None = None,
        receipt: bool = True,
        **headers: str,
    ) -> str:
        """Subscribe and wait for the broker to have done it: by the SUBSCRIBE's receipt, or
        without ``receipt`` by a round trip after it. (ActiveMQ starts a subscription asked
        for a receipt at prefetch 0 and gives it its prefetch just after the receipt: a
        message sent at that moment waits, and a topic's pending limit may drop it.)"""
        sid = sub_id or f"s{next(self._ids)}"
        if not receipt:
            self.conn.subscribe(destination, sid, ack=ack, headers=headers)
            self.sync()
            return sid
        rid = f"sub-{uuid.uuid4().hex}"
        self.conn.subscribe(destination, sid, ack=ack, headers={**headers, "receipt": rid})
        self.wait_receipt(rid)
        return sid

    def unsubscribe(self, sub_id: str, **headers: str) -> None:
        rid = f"unsub-{uuid.uuid4().hex}"
        self.conn.unsubscribe(sub_id, headers={**headers, "receipt": rid})
        self.wait_receipt(rid)

    def receive(self, timeout: float = WAIT_S) -> Received:
        return self.listener.messages.get(timeout=timeout)

    def receive_n(self, n: int, timeout: float = WAIT_S) -> list[Received]:
        return [self.receive(timeout) for _ in range(n)]

    def nothing_more(self) -> bool:
        """True when no message is waiting. The broker writes a dispatch before the receipt
        of the frame that caused it, so after our own receipt round trip anything already
        dispatched to us has arrived: no waiting on a clock."""
        self.sync()
        return self.listener.messages.empty()

    def ack(self, message: Received, transaction: str | None = None) -> None:
        self._settle(self.conn.ack, message, transaction)

    def nack(self, message: Received, transaction: str | None = None) -> None:
        self._settle(self.conn.nack, message, transaction)

    def _settle(self, verb: Any, message: Received, transaction: str | None) -> None:
        # stomp.py's signatures differ: 1.1 names the subscription, 1.0 and 1.2 do not.
        if self.version == "1.1":
            verb(message.id, message.headers["subscription"], transaction=transaction)
        else:
            verb(message.headers.get("ack", message.id), transaction=transaction)

    def sync(self) -> None:
        """Round trip a receipt: everything sent before has been processed by the broker."""
        rid = f"sync-{uuid.uuid4().hex}"
        self.conn.begin(rid)
        self.conn.abort(rid, headers={"receipt": rid})
        self.wait_receipt(rid)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """DISCONNECT, and return once the broker has handled it (its receipt ends the
        connection): stomp.py does not wait, and a test's next step on another connection
        could otherwise overtake it (finding a temporary queue of this one still there)."""
        # The broker may already have closed the socket (after an ERROR frame) before
        # stomp.py noticed: a failed DISCONNECT is then expected, not a test failure.
        if self.conn.is_connected():
            with contextlib.suppress(OSError, stomp.exception.StompException):
                self.conn.disconnect()
                with contextlib.suppress(queue.Empty):
                    self.listener.disconnected.get(timeout=DISCONNECT_WAIT_S)
