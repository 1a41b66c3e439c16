"""The receiving side of a bridge: a remote broker's forwarded sends are checked against
the message ids already had from it, so that a bridge sending again what it could not see
acknowledged (its broker or ours crashed in between) delivers nothing twice (ActiveMQ's
producer audit on network connections).

One audit per remote broker, across its connections (a bridge reconnects on a new one):
the ids of the last ``AUDIT_SIZE`` messages it forwarded. After a restart of this broker
the audit of a destination starts from what the destination holds (the first forwarded
send to it reads them once), so a send the remote repeats because our answer was lost in
the crash is still found. A message this broker forwards out again is forgotten, so that
it may come back later (its consumers moved again).

The window is also kept in a file per remote broker (``journal``: each id of a persistent
message remembered, or forgotten, appended as a line, written through at once, so a kill -9
loses none; rewritten with only the window when it has grown to twice its size), read back
at the first bridge connection after a restart: a message this broker had stored, answered
and seen consumed before a crash, sent again by a bridge that never saw the answer, is
still dropped (ActiveMQ keeps its producer audit in the KahaDB index for the same reason).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections import OrderedDict
from pathlib import Path
from typing import Final, TextIO

from dovecote.broker.query import BrokerQuery
from dovecote.core.destinations import Destination
from dovecote.core.message import Message
from dovecote.network.paths import broker_path

AUDIT_SIZE: Final = 65_536

log = logging.getLogger("dovecote.network")


def journal_name(remote_id: str) -> str:
    """A remote broker's audit file name (its id, made safe for a file system)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", remote_id) + ".audit"


class SendAudit:
    """The message ids one remote broker forwarded here lately."""

    def __init__(
        self,
        remote_id: str,
        query: BrokerQuery,
        size: int = AUDIT_SIZE,
        journal: Path | None = None,
    ) -> None:
        self.remote_id = remote_id
        self.query = query
        self.size = size
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._read: set[Destination] = set()
        self.duplicates = 0
        self.journal = journal
        self._file: TextIO | None = None
        self._lines = 0
        if journal is not None:
            self._open(journal)

    def duplicate(self, message: Message) -> bool:
        """True for a message already had (drop it, answer as if stored). A persistent one
        is remembered only once stored (``stored``): one remembered before its store write,
        lost with a crash in between, would drop the bridge's send of it again."""
        destination = message.destination
        if destination.is_queue and destination not in self._read:
            self._read.add(destination)
            self._read_back(destination)
        message_id = message.message_id
        if message_id in self._seen:
            self._seen.move_to_end(message_id)
            self.duplicates += 1
            return True
        if not message.persistent:
            self._remember(message_id, written=False)
        return False

    def stored(self, message: Message) -> None:
        """A message from the remote is stored (and routed): remembered for good."""
        if message.persistent and message.message_id not in self._seen:
            self._remember(message.message_id)

    def forget(self, message_id: str) -> None:
        if message_id in self._seen:
            del self._seen[message_id]
            self._append("-", message_id)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _remember(self, message_id: str, written: bool = True) -> None:
        """Keep ``message_id``, in the file too when ``written`` (a non-persistent message
        does not outlive a crash of this broker: neither need its id)."""
        self._seen[message_id] = None
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)
        if written:
            self._append("+", message_id)

    def _append(self, sign: str, message_id: str) -> None:
        if self._file is None:
            return
        try:
            self._file.write(f"{sign}{message_id}\n")
        except OSError as exc:
            log.warning("network audit %s: cannot write (%s): kept in memory only",
                        self.journal, exc.strerror)  # fmt: skip
            self.close()
            return
        self._lines += 1
        if self._lines > 2 * self.size:
            self._compact()

    def _open(self, journal: Path) -> None:
        """Read the window back, then append to it (line-buffered: each line written at
        once). A file that cannot be used leaves the audit in memory only."""
        try:
            journal.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError), journal.open(encoding="utf-8") as old:
                for line in old:
                    self._lines += 1
                    message_id = line.rstrip("\n")[1:]
                    if line.startswith("-"):
                        self._seen.pop(message_id, None)
                    elif message_id:
                        self._seen[message_id] = None
                        self._seen.move_to_end(message_id)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)
            self._file = journal.open("a", encoding="utf-8", buffering=1)
        except OSError as exc:
            log.warning("network audit %s: cannot use it (%s): kept in memory only",
                        journal, exc.strerror)  # fmt: skip

    def _compact(self) -> None:
        """Rewrite the file with only the window (a new file, then renamed over it)."""
        assert self.journal is not None
        fresh = self.journal.with_suffix(".new")
        self.close()
        try:
            with fresh.open("w", encoding="utf-8") as out:
                out.writelines(f"+{message_id}\n" for message_id in self._seen)
            os.replace(fresh, self.journal)
            self._file = self.journal.open("a", encoding="utf-8", buffering=1)
            self._lines = len(self._seen)
        except OSError as exc:
            log.warning("network audit %s: cannot rewrite it (%s): kept in memory only",
                        self.journal, exc.strerror)  # fmt: skip

    def _read_back(self, destination: Destination) -> None:
        """What the queue holds that came from this remote (after a restart of ours)."""
        for message in self.query.browse(destination, self.size):
            if self.remote_id in broker_path(message):
                self._remember(message.message_id)
