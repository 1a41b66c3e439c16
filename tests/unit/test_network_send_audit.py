"""The receiving side's audit of a remote broker's forwarded sends, on a real audit file: a
persistent message's id is kept for good only once the message is stored, so a crash
between the check and the store write cannot make the bridge's next send of it a
'duplicate' that is dropped (the message would be lost)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dovecote.core.destinations import topic
from dovecote.core.message import Message
from dovecote.network.audit import SendAudit


class NoQuery:
    def browse(self, destination: Any, limit: int) -> list[Message]:
        return []


def audit(journal: Path) -> SendAudit:
    return SendAudit("ID:remote", NoQuery(), journal=journal)  # type: ignore[arg-type]


def test_a_send_checked_but_not_stored_before_a_crash_is_taken_again(tmp_path: Path) -> None:
    journal = tmp_path / "remote.audit"
    message = Message("ID:remote-1:1:1:1", topic("t"), b"x", persistent=True)
    first = audit(journal)
    assert not first.duplicate(message)  # checked; the broker crashes before storing it
    first.close()
    after = audit(journal)
    assert not after.duplicate(message), "dropped as a duplicate: it would be lost"
    after.stored(message)
    after.close()
    again = audit(journal)
    assert again.duplicate(message)  # stored before this crash: dropped when sent again
    again.close()


def test_a_non_persistent_send_is_remembered_at_once_in_memory_only(tmp_path: Path) -> None:
    journal = tmp_path / "remote.audit"
    message = Message("ID:remote-1:1:1:2", topic("t"), b"x")
    first = audit(journal)
    assert not first.duplicate(message)
    assert first.duplicate(message)
    first.close()
    assert not audit(journal).duplicate(message)
