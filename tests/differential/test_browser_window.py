"""A queue browser is sent a prefetch's worth of messages at a time, more as it acknowledges
what it read, then the end of the browse: side by side, on bare OpenWire. (Before, dovecote
sent a browser the whole queue at once, whatever its prefetch.)"""

from __future__ import annotations

import time

from differ import Target
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from rawopenwire import Peer, message, queue

MESSAGES = 12
PREFETCH = 5
QUIET_S = 0.7
"""How long nothing more must come for a window to count as full."""


def _dispatches(peer: Peer, want: int) -> tuple[list[Structure], bool]:
    """Dispatches until ``want`` messages came or the broker stayed quiet; whether the end
    of the browse (a dispatch without a message) came too."""
    got: list[Structure] = []
    ended = False
    deadline = time.monotonic() + 10
    while not ended and time.monotonic() < deadline:
        wait = QUIET_S if len(got) >= want else deadline - time.monotonic()
        try:
            s = peer.next(max(0.01, wait))
        except TimeoutError:
            break
        if s.type == t.MESSAGE_DISPATCH:
            if s["message"] is None:
                ended = True
            else:
                got.append(s)
    return got, ended


def browse_in_windows(target: Target) -> list[tuple[int, bool]]:
    peer = Peer(target.openwire_port)
    try:
        my = peer.handshake(f"ID:browse-window-{target.name}",
                            client_id=f"browse-window-{target.name}", producer=True)  # fmt: skip
        destination = queue(target.name)
        for seq in range(1, MESSAGES + 1):
            peer.send(message(my, destination, seq, command_id=10 + seq, persistent=True))
            peer.until(t.RESPONSE)
        peer.send(Structure(t.CONSUMER_INFO, {
            "commandId": 100, "responseRequired": True, "consumerId": my["consumer"],
            "destination": destination, "prefetchSize": PREFETCH, "browser": True,
            "dispatchAsync": True,
        }))  # fmt: skip
        windows: list[tuple[int, bool]] = []
        command_id = 200
        while True:
            got, ended = _dispatches(peer, PREFETCH)
            windows.append((len(got), ended))
            if ended or not got:
                return windows
            command_id += 1
            peer.send(Structure(t.MESSAGE_ACK, {
                "commandId": command_id, "destination": destination,
                "consumerId": my["consumer"], "ackType": 2,
                "firstMessageId": got[0]["message"]["messageId"],
                "lastMessageId": got[-1]["message"]["messageId"], "messageCount": len(got),
            }))  # fmt: skip
    finally:
        peer.close()


def test_a_browser_gets_a_prefetch_at_a_time(differ) -> None:
    differ(browse_in_windows, [(5, False), (5, False), (2, True)])
