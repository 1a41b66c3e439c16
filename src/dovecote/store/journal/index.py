"""The journal's index in LMDB: a view of the journal that replay can always rebuild. Its
tables, and how their keys and entries are encoded: index_layout.py.

``apply`` is the one path by which operations change the index, live or in recovery
(live, through ``apply_records``, which leaves out what would cancel out).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import lmdb

from dovecote.core.collector import NoCollections
from dovecote.core.destinations import Destination, destination_matches, parse_destination
from dovecote.store.api import (
    AckSubscription,
    AddSubscription,
    DurableSubscription,
    RemoveDestination,
    RemoveMessage,
    RemoveSubscription,
    UpdateRedelivery,
)
from dovecote.store.journal.datafiles import Location
from dovecote.store.journal.index_layout import (
    CLEAN_MARK,
    FILE,
    INDEX_VERSION,
    LIVE,
    MAP_SIZE,
    POS,
    QPOS,
    QSTAT,
    SEQ,
    TOTALS_AT,
    get_value,
    joined_key,
    pack_entry,
    pop_value,
    queue_key,
    unpack_entry,
)
from dovecote.store.journal.records import (
    JournalOp,
    PassingThrough,
    SequencedAdd,
)


class Index:
    def __init__(self, path: str) -> None:
        # The journal is fsynced; the index need not be: after a crash it replays the tail
        # from ``applied``, and a damaged index is rebuilt from the journal.
        self.env = lmdb.open(
            path, max_dbs=10, map_size=MAP_SIZE, sync=False, metasync=False, lock=True
        )
        self.meta = self.env.open_db(b"meta")
        self.msgs = self.env.open_db(b"msgs")
        self.qids = self.env.open_db(b"qids")
        self.tids = self.env.open_db(b"tids")
        self.subs = self.env.open_db(b"subs")
        self.pend = self.env.open_db(b"pend")
        self.files = self.env.open_db(b"files")
        self.qseq = self.env.open_db(b"qseq")
        self.qstat = self.env.open_db(b"qstat")
        self._totals: dict[str, list[int]] = self._load_totals()
        """Each queue's [count, bytes] (see ``qstat``), as of the last commit."""
        self._txn_totals: dict[str, list[int]] = {}
        """What the open write transaction changed in them (see ``commit``)."""
        self._deltas: dict[int, tuple[int, int]] = {}
        """Live counts by file, changed by the record being applied (see ``apply``)."""
        self._top_seq = 0

    def begin(self) -> lmdb.Transaction:
        """A write transaction that changes what it counts (``commit`` or ``abort`` it)."""
        self._txn_totals = {}
        return self.env.begin(write=True)

    def commit(self, txn: lmdb.Transaction) -> None:
        """Commit, then take the transaction's queue counts in (a failed commit raises, and
        they are dropped: applying the same records again counts them once)."""
        changes, self._txn_totals = self._txn_totals, {}
        txn.commit()
        for destination, (count, size) in changes.items():
            totals = self._totals.get(destination)
            if totals is None:
                totals = self._totals[destination] = [0, 0]
            totals[0] += count
            totals[1] += size
            if totals[0] <= 0:
                del self._totals[destination]

    def abort(self, txn: lmdb.Transaction) -> None:
        self._txn_totals = {}
        txn.abort()

    def close(self) -> None:
        try:
            with self.env.begin(write=True) as txn:
                txn.drop(self.qstat, delete=False)
                for name, (count, size) in self._totals.items():
                    txn.put(name.encode(), QSTAT.pack(count, size), db=self.qstat)
                applied = get_value(txn, b"applied", self.meta)
                if applied is not None:
                    txn.put(TOTALS_AT, applied, db=self.meta)
            self.env.sync(True)
            closed_cleanly = True
        except lmdb.Error:  # (a full disk) without the mark, the next open counts again
            closed_cleanly = False
        directory = self.env.path()
        self.env.close()
        if closed_cleanly:
            with open(os.path.join(directory, CLEAN_MARK), "wb") as f:
                os.fsync(f.fileno())

    def _load_totals(self) -> dict[str, list[int]]:
        with self.env.begin() as txn:
            at = get_value(txn, TOTALS_AT, self.meta)
            if at is not None and at == get_value(txn, b"applied", self.meta):
                return {
                    bytes(key).decode(): list(QSTAT.unpack(value))
                    for key, value in txn.cursor(db=self.qstat)
                }
            totals: dict[str, list[int]] = {}
            for key, value in txn.cursor(db=self.qseq):
                name = bytes(key[:-17]).decode()
                found = totals.get(name)
                if found is None:
                    found = totals[name] = [0, 0]
                found[0] += 1
                found[1] += SEQ.unpack(value)[0]
            return totals

    # -- meta ------------------------------------------------------------------------------

    def applied(self) -> Location | None:
        with self.env.begin() as txn:
            raw = get_value(txn, b"applied", self.meta)
        return None if raw is None else Location(*POS.unpack(raw))

    def version(self) -> int | None:
        with self.env.begin() as txn:
            raw = get_value(txn, b"version", self.meta)
        return None if raw is None else int(SEQ.unpack(raw)[0])

    def mark_version(self, txn: lmdb.Transaction) -> None:
        txn.put(b"version", SEQ.pack(INDEX_VERSION), db=self.meta)

    def last_seq(self) -> int:
        with self.env.begin() as txn:
            return self.last_seq_in(txn)

    # -- applying --------------------------------------------------------------------------

    def _count_queue(self, destination: str, count: int, size: int) -> None:
        changes = self._txn_totals.get(destination)
        if changes is None:
            changes = self._txn_totals[destination] = [0, 0]
        changes[0] += count
        changes[1] += size

    def left_out(
        self,
        txn: lmdb.Transaction,
        pieces: list[list[tuple[Location, list[JournalOp]]]],
        ops_per_slice: int = 0,
    ) -> Iterator[tuple[set[int], int] | None]:
        """What applying ``pieces`` (a catch-up's slices of records) may leave out, for the
        same end state: each queue message both added and removed within them (the usual case),
        as its operations' ``id``s; and the highest seq among them, which must still become the
        index's (``raise_top_seq``, once the rest is applied). Yielded last, after a None
        between each two pieces and after each ``ops_per_slice`` pairs checked (0: none)."""
        finder = PassingThrough(self.last_seq_in(txn))
        for i, piece in enumerate(pieces):
            if i:
                yield None
            for _, ops in piece:
                finder.feed(ops)
        skipped: set[int] = set()
        top = 0
        prefixes: dict[Destination, bytes] = {}
        with NoCollections():
            for n, (add, removal) in enumerate(finder.pairs):
                if ops_per_slice and n and n % ops_per_slice == 0:
                    yield None
                message = add.message
                destination = message.destination
                prefix = prefixes.get(destination)
                if prefix is None:
                    prefix = prefixes[destination] = joined_key(str(destination), "")
                # (Unless the index holds that id on that queue: the add would replace it.)
                if get_value(txn, prefix + message.message_id.encode(), self.qids) is None:
                    skipped.add(id(add))
                    skipped.add(id(removal))
                    top = max(top, add.seq)
        yield skipped, top

    def apply_records(
        self,
        txn: lmdb.Transaction,
        records: list[tuple[Location, list[JournalOp]]],
        left_out: tuple[set[int], int] | None = None,
    ) -> None:
        """``apply`` each record in order, in one transaction, to the same end state, but for
        what cancels out (``left_out``: given for a catch-up in slices, found across all of
        them; else found within these records, and the top seq raised here)."""
        whole = left_out is None
        if left_out is None:
            left_out = next(found for found in self.left_out(txn, [records]) if found)
        skipped, top = left_out
        with NoCollections():  # (a commit's 100,000 sends: entries made and freed)
            noted = -1
            for location, ops in records:
                # Each file noted once per run of its records (they come in file order), not once
                # per record, and a record left with nothing to apply costs nothing: a catch-up
                # after a lone synchronous producer is mostly such records.
                if location.file_id != noted:
                    noted = location.file_id
                    self.note_file(txn, noted)
                if skipped:
                    ops = [op for op in ops if id(op) not in skipped]
                    if not ops:
                        continue
                self.apply(txn, ops, location)
            if whole and top:
                self.raise_top_seq(txn, top)

    def last_seq_in(self, txn: lmdb.Transaction) -> int:
        raw = get_value(txn, b"seq", self.meta)
        return 0 if raw is None else int(SEQ.unpack(raw)[0])

    def apply(self, txn: lmdb.Transaction, ops: list[JournalOp], at: Location) -> None:
        # Each file's live count and the highest seq change once per record, not once per
        # operation; runs of new queue messages (kind 1) and removals (2) go a run at a time.
        self._deltas = {}
        self._top_seq = 0
        indexed_top = self.last_seq_in(txn)
        run: list[Any] = []
        run_kind = 0
        for op in ops:
            kind = 2 if isinstance(op, RemoveMessage) else 0
            if isinstance(op, SequencedAdd) and op.seq > indexed_top:
                kind = 1 if op.message.destination.is_queue else 0
            if run and kind != run_kind:
                self._apply_run(txn, run, run_kind, at)
                run = []
            if kind:
                run.append(op)
                run_kind = kind
                continue
            match op:
                case SequencedAdd():
                    self._add(txn, op, at)
                case UpdateRedelivery(destination, message_id, counter):
                    seq = get_value(txn, joined_key(str(destination), message_id), self.qids)
                    if seq is None:
                        seq = get_value(txn, message_id.encode(), self.tids)
                    raw = None if seq is None else get_value(txn, seq, self.msgs)
                    if seq is not None and raw is not None:
                        entry = unpack_entry(raw)
                        entry[4] = counter
                        txn.put(seq, pack_entry(entry), db=self.msgs)
                case AddSubscription(sub):
                    key = joined_key(sub.client_id, sub.name)
                    old = get_value(txn, key, self.subs)
                    if old is not None:
                        self._count(txn, unpack_entry(old)[3], -1)
                    value = [str(sub.destination), sub.selector, sub.no_local, at.file_id]
                    txn.put(key, pack_entry(value), db=self.subs)
                    self._count(txn, at.file_id, +1)
                case RemoveSubscription(_, client_id, name):
                    self._remove_subscription(txn, client_id, name)
                case AckSubscription(_, client_id, name, message_id):
                    seq = get_value(txn, message_id.encode(), self.tids)
                    if seq is not None and txn.delete(
                        joined_key(client_id, name) + b"\0" + seq, db=self.pend
                    ):
                        self._release(txn, seq)
                case RemoveDestination(destination):
                    prefix = joined_key(str(destination), "")
                    with txn.cursor(db=self.qids) as cursor:
                        found = cursor.set_range(prefix)
                        doomed = []
                        while found and bytes(cursor.key()).startswith(prefix):
                            doomed.append((bytes(cursor.key()), bytes(cursor.value())))
                            found = cursor.next()
                    for key, seq in doomed:
                        txn.delete(key, db=self.qids)
                        self._drop_message(txn, seq, pop_value(txn, seq, self.msgs))
        if run:
            self._apply_run(txn, run, run_kind, at)
        self._write_counts(txn)

    def _apply_run(self, txn: lmdb.Transaction, run: list[Any], kind: int, at: Location) -> None:
        if kind == 1:
            return self._add_new(txn, run, at)
        self._remove_all(txn, run)

    def _write_counts(self, txn: lmdb.Transaction) -> None:
        for file_id, (delta, size) in self._deltas.items():
            if delta or size:
                key = FILE.pack(file_id)
                raw = get_value(txn, key, self.files)
                count, total = (0, 0) if raw is None else LIVE.unpack(raw)
                live = LIVE.pack(max(count + delta, 0), max(total + size, 0))
                txn.put(key, live, db=self.files)
        if self._top_seq:
            self.raise_top_seq(txn, self._top_seq)

    def raise_top_seq(self, txn: lmdb.Transaction, seq: int) -> None:
        if self.last_seq_in(txn) < seq:
            txn.put(b"seq", SEQ.pack(seq), db=self.meta)

    def mark_applied(self, txn: lmdb.Transaction, position: Location) -> None:
        txn.put(b"applied", POS.pack(position.file_id, position.offset), db=self.meta)

    def _add(self, txn: lmdb.Transaction, op: SequencedAdd, at: Location) -> None:
        message = op.message
        seq = SEQ.pack(op.seq)
        if op.seq > self._top_seq:
            self._top_seq = op.seq
        old = get_value(txn, seq, self.msgs)
        if old is not None:
            # Compaction wrote it again: only its location moves.
            entry = unpack_entry(old)
            self._count(txn, entry[2], -1, -entry[9])
            entry[2], entry[3] = at.file_id, at.offset
            txn.put(seq, pack_entry(entry), db=self.msgs)
            self._count(txn, at.file_id, +1, entry[9])
            return
        destination = message.destination
        if destination.is_queue:
            self._add_new(txn, [op], at, append=False)
            return
        waiting = [
            bytes(key)
            for key, value in txn.cursor(db=self.subs)
            if destination_matches(parse_destination(unpack_entry(bytes(value))[0]), destination)
        ]
        if not waiting:
            return
        for key in waiting:
            txn.put(key + b"\0" + seq, b"", db=self.pend)
        txn.put(message.message_id.encode(), seq, db=self.tids)
        entry = [str(destination), message.message_id, at.file_id, at.offset,
                 message.redelivery_counter, len(waiting), message.priority, message.expiration,
                 message.sequence, message.size]  # fmt: skip
        txn.put(seq, pack_entry(entry), db=self.msgs)
        self._count(txn, at.file_id, +1, message.size)

    def _add_new(
        self, txn: lmdb.Transaction, adds: list[SequencedAdd], at: Location, append: bool = True
    ) -> None:
        """Queue messages' entries, made in one pass and written with ``putmulti`` (one call
        per table, not three per message: a transaction's 100,000 sends are one record).
        ``append``: their seqs are above every seq held (at the end of ``msgs``, in order)."""
        entries: list[tuple[bytes, bytes]] = []
        ids: list[tuple[bytes, bytes]] = []
        order: list[tuple[bytes, bytes]] = []
        destination = None
        name = ""
        prefix = b""
        total = last = 0
        for op in adds:
            message = op.message
            if message.destination is not destination:
                destination = message.destination
                name = str(destination)
                prefix = joined_key(name, "")
            append = append and op.seq > last
            last = op.seq
            seq = SEQ.pack(op.seq)
            size = message.size
            entry = [
                name, message.message_id, at.file_id, at.offset, message.redelivery_counter, -1,
                message.priority, message.expiration, message.sequence, size,
            ]  # fmt: skip
            entries.append((seq, pack_entry(entry)))
            ids.append((prefix + message.message_id.encode(), seq))
            order.append((queue_key(prefix, message.sequence, seq), SEQ.pack(size)))
            self._count_queue(name, 1, size)
            total += size
        txn.cursor(db=self.qids).putmulti(ids)
        txn.cursor(db=self.qseq).putmulti(order)
        txn.cursor(db=self.msgs).putmulti(entries, append=append)
        self._top_seq = max(self._top_seq, last if append else max(op.seq for op in adds))
        self._count(txn, at.file_id, len(adds), total)

    def _remove_all(self, txn: lmdb.Transaction, removals: list[RemoveMessage]) -> None:
        """The removals table by table, each through one cursor: the ids first, then the
        entries and the queue order in key order, so each delete lands next to the last (a
        Spark batch's commit removes 25,000 messages in one record)."""
        seqs: list[bytes] = []
        destination = None
        prefix = b""
        with txn.cursor(db=self.qids) as ids:
            for op in removals:
                if op.destination is not destination:
                    destination = op.destination
                    prefix = joined_key(str(destination), "")
                seq = ids.pop(prefix + op.message_id.encode())
                if seq is not None:
                    seqs.append(bytes(seq))
        seqs.sort()
        in_order: list[bytes] = []
        with txn.cursor(db=self.msgs) as entries:
            for seq in seqs:
                raw: Any = entries.pop(seq)
                if raw is not None:
                    key = self._drop_entry(txn, seq, unpack_entry(raw))
                    if key is not None:
                        in_order.append(key)
        in_order.sort()
        with txn.cursor(db=self.qseq) as order:
            for key in in_order:
                if order.set_key(key):
                    order.delete()

    def _drop_message(self, txn: lmdb.Transaction, seq: bytes, raw: Any) -> None:
        """What refers to the entry of ``seq``, popped from ``msgs`` (``raw``; None: none)."""
        if raw is not None:
            key = self._drop_entry(txn, seq, unpack_entry(raw))
            if key is not None:
                txn.delete(key, db=self.qseq)

    def _drop_entry(self, txn: lmdb.Transaction, seq: bytes, entry: list[Any]) -> bytes | None:
        """What refers to ``entry`` (popped from ``msgs``) but its place in ``qseq``, which it
        returns for a queue message (None for a topic's): the caller deletes it."""
        self._count(txn, entry[2], -1, -entry[9])
        if entry[5] >= 0:
            txn.delete(entry[1].encode(), db=self.tids)
            return None
        self._count_queue(entry[0], -1, -entry[9])
        return queue_key(joined_key(entry[0], ""), entry[8], seq)

    def forget(self, txn: lmdb.Transaction, seqs: list[int]) -> list[list[Any]]:
        """Remove messages whose record is damaged (lost) from everything that refers to
        them; returns their entries (see ``msgs``)."""
        self._deltas = {}
        self._top_seq = 0
        gone: list[list[Any]] = []
        subscriptions = [bytes(key) for key, _ in txn.cursor(db=self.subs)]
        for number in seqs:
            seq = SEQ.pack(number)
            raw = get_value(txn, seq, self.msgs)
            if raw is None:
                continue
            entry = unpack_entry(raw)
            if entry[5] < 0:
                txn.delete(joined_key(entry[0], entry[1]), db=self.qids)
            else:
                for key in subscriptions:
                    txn.delete(key + b"\0" + seq, db=self.pend)
            self._drop_message(txn, seq, pop_value(txn, seq, self.msgs))
            gone.append(entry)
        self._write_counts(txn)
        return gone

    def _release(self, txn: lmdb.Transaction, seq: bytes) -> None:
        """One durable subscription less waits for a topic message."""
        raw = get_value(txn, seq, self.msgs)
        if raw is None:
            return
        entry = unpack_entry(raw)
        entry[5] -= 1
        if entry[5] <= 0:
            self._drop_message(txn, seq, pop_value(txn, seq, self.msgs))
        else:
            txn.put(seq, pack_entry(entry), db=self.msgs)

    def _remove_subscription(self, txn: lmdb.Transaction, client_id: str, name: str) -> None:
        key = joined_key(client_id, name)
        old = pop_value(txn, key, self.subs)
        if old is None:
            return
        self._count(txn, unpack_entry(old)[3], -1)
        prefix = key + b"\0"
        with txn.cursor(db=self.pend) as cursor:
            found = cursor.set_range(prefix)
            pending = []
            while found and bytes(cursor.key()).startswith(prefix):
                pending.append(bytes(cursor.key()))
                found = cursor.next()
        for pend_key in pending:
            txn.delete(pend_key, db=self.pend)
            self._release(txn, pend_key[len(prefix) :])

    def _count(self, txn: lmdb.Transaction, file_id: int, delta: int, size: int = 0) -> None:
        """Written at the end of ``apply`` (a subscription counts with no size)."""
        count, total = self._deltas.get(file_id, (0, 0))
        self._deltas[file_id] = (count + delta, total + size)

    def note_file(self, txn: lmdb.Transaction, file_id: int) -> None:
        key = FILE.pack(file_id)
        if get_value(txn, key, self.files) is None:
            txn.put(key, LIVE.pack(0, 0), db=self.files)

    # -- reading ---------------------------------------------------------------------------

    def live_counts(self) -> dict[int, tuple[int, int]]:
        """Each data file's live messages and subscriptions, and the messages' bytes."""
        with self.env.begin() as txn:
            return {FILE.unpack(k)[0]: LIVE.unpack(v) for k, v in txn.cursor(db=self.files)}

    def forget_file(self, file_id: int) -> None:
        with self.env.begin(write=True) as txn:
            txn.delete(FILE.pack(file_id), db=self.files)

    def messages(self) -> Iterator[tuple[int, list[Any]]]:
        """Every live message as (seq, [destination, id, file, offset, redelivery, refs,
        ...]) (see ``msgs``)."""
        with self.env.begin() as txn:
            for key, value in txn.cursor(db=self.msgs):
                yield SEQ.unpack(key)[0], unpack_entry(value)

    def message_ids(self) -> Iterator[str]:
        """Every live message's id, read from the id keys alone (qids: <queue>\0<id>;
        tids: <id>), one at a time."""
        with self.env.begin() as txn:
            for key in txn.cursor(db=self.qids).iternext(values=False):
                yield bytes(key).split(b"\0", 1)[1].decode()
            for key in txn.cursor(db=self.tids).iternext(values=False):
                yield bytes(key).decode()

    def subscriptions(self) -> Iterator[tuple[DurableSubscription, int, list[int]]]:
        """Every durable subscription, the file of its record, and its pending seqs."""
        with self.env.begin() as txn:
            for key, value in txn.cursor(db=self.subs):
                client_id, name = key.decode().split("\0", 1)
                destination, selector, no_local, file_id = unpack_entry(value)
                sub = DurableSubscription(
                    client_id, name, parse_destination(destination), selector, no_local
                )
                prefix = key + b"\0"
                pending: list[int] = []
                with txn.cursor(db=self.pend) as cursor:
                    found = cursor.set_range(prefix)
                    while found and bytes(cursor.key()).startswith(prefix):
                        pending.append(SEQ.unpack(bytes(cursor.key())[len(prefix) :])[0])
                        found = cursor.next()
                yield sub, file_id, pending

    def queue_totals(self) -> dict[str, tuple[int, int, int]]:
        """Each queue that holds messages: (count, bytes, its highest broker sequence)."""
        totals: dict[str, tuple[int, int, int]] = {}
        with self.env.begin() as txn, txn.cursor(db=self.qseq) as cursor:
            for text, (count, size) in self._totals.items():
                name = text.encode()
                # The last of this queue's keys: the one before the first key past them all.
                found = cursor.prev() if cursor.set_range(name + b"\1") else cursor.last()
                last_key = bytes(cursor.key()) if found else b""
                last = 0
                if last_key.startswith(name + b"\0"):
                    last = SEQ.unpack(last_key[len(name) + 1 : len(name) + 9])[0]
                totals[text] = (count, size, last)
        return totals

    def queue_seqs_in_file(self, destination: str, file_id: int) -> list[int]:
        """A queue's messages located in one data file (a walk over the queue: for a file
        found missing, not for every day)."""
        prefix = joined_key(destination, "")
        found: list[int] = []
        with self.env.begin() as txn, txn.cursor(db=self.qseq) as cursor:
            more = cursor.set_range(prefix)
            while more:
                key = bytes(cursor.key())
                if not key.startswith(prefix):
                    break
                raw = get_value(txn, key[-8:], self.msgs)
                if raw is not None and unpack_entry(raw)[2] == file_id:
                    found.append(SEQ.unpack(key[-8:])[0])
                more = cursor.next()
        return found

    def queue_count(self, destination: str) -> int:
        return self._totals.get(destination, [0])[0]

    def queue_page(
        self, destination: str, start: tuple[int, int], limit: int
    ) -> list[tuple[int, int, list[Any]]]:
        """Up to ``limit`` of a queue's messages from position ``start`` (broker sequence,
        seq) on, in order, as (sequence, seq, entry) (see ``msgs``)."""
        prefix = joined_key(destination, "")
        page: list[tuple[int, int, list[Any]]] = []
        with self.env.begin() as txn, txn.cursor(db=self.qseq) as cursor:
            found = cursor.set_range(prefix + QPOS.pack(max(start[0], 0), max(start[1], 0)))
            while found and len(page) < limit:
                key = bytes(cursor.key())
                if not key.startswith(prefix):
                    break
                sequence, seq = QPOS.unpack(key[len(prefix) :])
                raw = get_value(txn, key[-8:], self.msgs)
                if raw is not None:
                    page.append((sequence, seq, unpack_entry(raw)))
                found = cursor.next()
        return page
