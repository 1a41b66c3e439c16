"""A STOMP client's durable topic subscriptions, side by side on bare STOMP: made without a
client id (the connection's own id stands in, as on ActiveMQ), removed by an UNSUBSCRIBE that
names them (from any connection of the client id, with or without the subscription open on
it), refused while a consumer is on them."""

from __future__ import annotations

from differ import Target
from rawstomp import RawStomp


class Stomp(RawStomp):
    def open(self, client_id: str | None = None) -> Stomp:
        extra = f"client-id:{client_id}\n" if client_id else ""
        self.send(f"CONNECT\naccept-version:1.2\nhost:x\n{extra}\n\x00".encode())
        assert self.read_frame()[0] == "CONNECTED"
        return self

    def ask(self, frame: str, receipt: str, body: str = "") -> str:
        """Send ``frame`` (its command and headers) with a receipt: "receipt" or "error"."""
        self.send(f"{frame}\nreceipt:{receipt}\n\n{body}\x00".encode())
        answer, _, _ = self.read_frame()
        while answer == "MESSAGE":
            answer, _, _ = self.read_frame()
        return answer.lower()

    def bodies(self) -> list[str]:
        """Messages until none comes for a second."""
        got: list[str] = []
        self.sock.settimeout(1.0)
        try:
            while True:
                command, _, body = self.read_frame()
                if command == "MESSAGE":
                    got.append(body.decode())
        except TimeoutError:
            return got
        finally:
            self.sock.settimeout(10)


def publish(target: Target, topic: str, body: str) -> None:
    producer = Stomp(target.stomp_address).open()
    try:
        assert (
            producer.ask(f"SEND\ndestination:{topic}\npersistent:true", "sent", body) == "receipt"
        )
    finally:
        producer.close()


def durable_lifecycle(target: Target) -> list[object]:
    topic = f"/topic/{target.name}"
    client_id = f"stomp-durable-{target.name}"
    durable = f"SUBSCRIBE\ndestination:{topic}\nid:1\nactivemq.subscriptionName:d"
    seen: list[object] = []
    # No client id: the durable subscription is made all the same.
    anonymous = Stomp(target.stomp_address).open()
    try:
        seen.append(anonymous.ask(durable, "s0"))
    finally:
        anonymous.close()
    first = Stomp(target.stomp_address).open(client_id)
    try:
        seen.append(first.ask(durable, "s1"))
        # Named while its consumer is on it: refused, and the subscription goes on.
        seen.append(first.ask("UNSUBSCRIBE\nid:1\nactivemq.subscriptionName:d", "u1"))
        publish(target, topic, "while open")
        seen.append(first.bodies())
        seen.append(first.ask("UNSUBSCRIBE\nid:1", "u2"))  # the consumer goes, it stays
    finally:
        first.close()
    publish(target, topic, "while away")
    second = Stomp(target.stomp_address).open(client_id)
    try:
        # Removed by name from a connection that never subscribed to it.
        seen.append(second.ask("UNSUBSCRIBE\nid:9\nactivemq.subscriptionName:d", "u3"))
        publish(target, topic, "after removal")
        seen.append(second.ask(durable, "s2"))
        seen.append(second.bodies())  # a new subscription: nothing kept from before
    finally:
        second.close()
    return seen


def test_stomp_durable_subscriptions_live_and_go_as_on_activemq(differ) -> None:
    differ(
        durable_lifecycle,
        ["receipt", "receipt", "error", ["while open"], "receipt", "receipt", "receipt", []],
    )
