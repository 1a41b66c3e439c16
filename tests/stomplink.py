"""A blocking STOMP 1.2 connection built on dovecote's own frame codec, for tests that need
exact control of each frame (crash and flow-control tests)."""

from __future__ import annotations

import socket

from dovecote.protocol.stomp import HEARTBEAT, NEED_DATA, Frame, FrameParser, encode_frame


class Link:
    """One connection; ``read`` returns the next frame, raising ConnectionError at EOF."""

    def __init__(self, port: int, client_id: str | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.parser = FrameParser(version="1.2")
        headers = [("accept-version", "1.2"), ("host", "x")]
        if client_id:
            headers.append(("client-id", client_id))
        self.send(Frame("CONNECT", tuple(headers)))
        assert self.read().command == "CONNECTED"

    def send(self, frame: Frame) -> None:
        self.sock.sendall(encode_frame(frame))

    def read(self) -> Frame:
        while True:
            event = self.parser.next_event()
            if isinstance(event, Frame):
                return event
            if event is NEED_DATA:
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("broker went away")
                self.parser.receive_data(data)
            assert event in (NEED_DATA, HEARTBEAT)

    def until_receipt(self) -> Frame:
        """Read past everything else to the next RECEIPT (frames are handled in order: it
        also says everything sent before it was done)."""
        while (frame := self.read()).command != "RECEIPT":
            pass
        return frame

    def take_backlog(self, destination: str, *headers: tuple[str, str]) -> list[Frame]:
        """Subscribe with auto ack, unsubscribe at once, and return the messages that came
        before the UNSUBSCRIBE's receipt: an auto-ack subscription whose window is larger
        than the backlog is sent all that the destination holds as it attaches, and the
        connection's frames are handled in order."""
        window = ("activemq.prefetchSize", "10000000")
        self.send(Frame("SUBSCRIBE", (("destination", destination), ("id", "backlog"),
                                      ("receipt", "backlog"), window, *headers)))  # fmt: skip
        self.send(Frame("UNSUBSCRIBE", (("id", "backlog"), ("receipt", "backlog-end"))))
        messages = []
        while (frame := self.read()).get("receipt-id") != "backlog-end":
            if frame.command == "MESSAGE":
                messages.append(frame)
            else:
                assert frame.get("receipt-id") == "backlog", frame
        return messages

    def close(self) -> None:
        self.sock.close()
