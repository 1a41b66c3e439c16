"""Damage to the journal store's files and what it cost (FORMAT.md: Torn tails and damaged
records): what a replay lost in the ranges it skipped, the index's checks before LMDB maps
it, and which LMDB errors mean its pages are damaged. Kept out of the compiled modules: it
runs only when something is damaged (and at an open after a crash)."""

from __future__ import annotations

import logging
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import lmdb

from dovecote.store.journal.datafiles import Damage, DataFiles
from dovecote.store.journal.index import Index
from dovecote.store.journal.index_layout import CLEAN_MARK
from dovecote.store.journal.records import JournalOp, SequencedAdd
from dovecote.store.ops import AckSubscription, RemoveMessage

log = logging.getLogger("dovecote.store.journal")

INDEX_DAMAGE: Final = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.InvalidError,
    lmdb.PanicError,
    lmdb.BadTxnError,  # (what a transaction that met one of those says next)
    lmdb.IncompatibleError,
)
"""LMDB's errors that say the index's pages are not what it wrote."""


def tally(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} of {name}" for name, n in sorted(counts.items()))


class LostInReplay:
    """What a replay's skipped ranges cost: the messages added there (by destination and
    id), less those a later record removes or acknowledges; one log line per range."""

    def __init__(self, damage: list[Damage]) -> None:
        damage.clear()
        self._damage = damage
        self._seen = 0
        self._lost: dict[tuple[str, str], int] = {}
        """(destination, message id) -> the index of its range in ``damage``."""

    def _take_new_ranges(self) -> None:
        while self._seen < len(self._damage):
            for op in self._damage[self._seen].salvaged:
                if isinstance(op, SequencedAdd):
                    key = (str(op.message.destination), op.message.message_id)
                    self._lost[key] = self._seen
            self._seen += 1

    def applying(self, ops: list[JournalOp]) -> None:
        """A good record, in journal order (the ranges skipped before it are noted first)."""
        self._take_new_ranges()
        if self._lost:
            for op in ops:
                if isinstance(op, (RemoveMessage, AckSubscription)):
                    self._lost.pop((str(op.destination), op.message_id), None)

    def report(self) -> None:
        self._take_new_ranges()
        for number, damage in enumerate(self._damage):
            adds: dict[str, int] = {}
            for (destination, _), at in self._lost.items():
                if at == number:
                    adds[destination] = adds.get(destination, 0) + 1
            _report(damage, adds)
        self._damage.clear()


def _report(damage: Damage, adds: dict[str, int]) -> None:
    others = sum(not isinstance(op, SequencedAdd) for op in damage.salvaged)
    where = f"journal db-{damage.file_id}.log bytes {damage.start}-{damage.end}"
    what = f"lost: {sum(adds.values())} messages" + (f" ({tally(adds)})" if adds else "")
    if others:
        what += f", {others} other operations (a lost removal delivers its message again)"
    if damage.torn_tail:
        log.warning("%s: %s; the tail of an interrupted write, cut off (%s)",
                    where, damage.why, what)  # fmt: skip
    else:
        log.error("%s: %s; skipped to the next good record (%s)", where, damage.why, what)


def check_journal(files: DataFiles, index: Index) -> None:
    """KahaDB's checkForCorruptJournalFiles, at start: every record the index has applied
    is read and its checksum checked (the replay checks the rest), and the messages still
    stored in a damaged range are reported lost by destination and dropped from the index,
    before the broker serves anything. Without it such damage is found when read."""
    until = index.applied()
    if until is None:
        return  # a new index: the replay reads (and checks) everything
    files.damage.clear()
    good = files.verify(until)
    damage, files.damage = files.damage, []
    entries = list(index.messages()) if damage else []
    for range_ in damage:
        whole = range_.end <= range_.start  # (a file that cannot be read at all)
        seqs = [
            seq for seq, entry in entries
            if entry[2] == range_.file_id and (whole or range_.start <= entry[3] < range_.end)
        ]  # fmt: skip
        where = f"db-{range_.file_id}.log"
        if not whole:
            where += f" bytes {range_.start}-{range_.end}"
        if seqs:
            forget_lost(index, where, seqs, range_.why)
        else:
            log.warning("journal %s is damaged (%s): nothing stored there is still needed",
                        where, range_.why)  # fmt: skip
    log.info("journal check: %d records in %d data files verified, %d damaged ranges",
             good, len(files.file_ids), len(damage))  # fmt: skip


def forget_lost(index: Index, where: str, seqs: list[int], why: str) -> list[list[Any]]:
    """Messages whose record cannot be read back are lost: dropped from the index (the
    journal keeps nothing of them a replay could apply), with one log line. Returns their
    index entries."""
    txn = index.begin()
    try:
        gone = index.forget(txn, seqs)
        index.commit(txn)
    except BaseException:
        index.abort(txn)
        raise
    counts: dict[str, int] = {}
    for entry in gone:
        counts[entry[0]] = counts.get(entry[0], 0) + 1
    log.error("journal %s cannot be read (%s): %d messages lost (%s), removed from the "
              "store", where, why, len(gone), tally(counts))  # fmt: skip
    return gone


def usable_index(path: Path, journal_exists: bool) -> bool:
    """Whether the index at ``path`` may be opened; if not (it must be built anew from the
    journal), a log line says why."""
    data = path / "data.mdb"
    if not data.exists() or data.stat().st_size == 0:
        if journal_exists:  # (deleted by hand, say: no damage, so no warning)
            log.info("journal index at %s is missing; rebuilding it from the journal", path)
        return False
    problem = index_problem(path)
    if problem is not None:
        log.warning("journal index at %s is damaged (%s); rebuilding it from the journal",
                    path, problem)  # fmt: skip
        return False
    return True


def index_problem(path: Path) -> str | None:
    """Why an existing index must not be mapped, or None. LMDB trusts its file: a page the
    file does not hold, or an offset inside a page that points past the file, kills the
    process with SIGBUS. So the meta pages are checked with plain reads, and after a crash
    (no mark of a synced close: the index is not synced as it goes) every page is read
    first in a child process."""
    clean = (path / CLEAN_MARK).exists()
    (path / CLEAN_MARK).unlink(missing_ok=True)  # until the next synced close
    problem = index_file_problem(str(path))
    if problem is None and not clean:
        problem = index_walk_problem(str(path))
    return problem


_META: Final = struct.Struct("<QHHHHIIQQ")
"""An LMDB meta page's start: page number, pad, flags, lower, upper; then the meta's
magic, version, address and map size."""
_DB: Final = struct.Struct("<IHHQQQQQ")
"""LMDB's MDB_db: pad (the page size, in the free DB's), flags, depth, branch, leaf and
overflow page counts, entries, root page."""
_LMDB_MAGIC: Final = 0xBEEFC0DE
_NO_PAGE: Final = (1 << 64) - 1


def index_file_problem(directory: str) -> str | None:
    """What is wrong with an LMDB environment's ``data.mdb`` before LMDB maps it, or None
    (also for no file: LMDB makes a new one). LMDB trusts the file to hold every page its
    meta names, and a page the mapping does not cover kills the process with SIGBUS: so
    the meta pages are read and checked here with plain reads (FORMAT.md)."""
    path = os.path.join(directory, "data.mdb")
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return None
            first = f.read(_META.size + 2 * _DB.size + 16)
            if len(first) < _META.size + 2 * _DB.size + 16:
                return f"data.mdb is {size} bytes, too short to be an LMDB file"
            page_size = _DB.unpack_from(first, _META.size)[0]
            if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
                return f"data.mdb is not an LMDB file (page size {page_size})"
            f.seek(page_size)
            second = f.read(len(first))
    except OSError as exc:
        return f"data.mdb cannot be read ({exc})"
    metas = []
    for page in (first, second):
        if len(page) < len(first):
            continue
        _, _, flags, _, _, magic, version, _, _ = _META.unpack_from(page)
        if magic != _LMDB_MAGIC or version != 1 or not flags & 0x08:
            continue
        roots = [_DB.unpack_from(page, _META.size + i * _DB.size)[7] for i in range(2)]
        last_page, txnid = struct.unpack_from("<QQ", page, _META.size + 2 * _DB.size)
        metas.append((txnid, last_page, roots))
    if not metas:
        return "data.mdb has no valid LMDB meta page"
    _, last_page, roots = max(metas)
    if any(root != _NO_PAGE and root > last_page for root in roots):
        return "data.mdb's meta page names a root past its last page"
    needed = (last_page + 1) * page_size
    if size < needed:
        return f"data.mdb is {size} bytes where its meta page needs {needed} (truncated)"
    return None


_WALK = """
import sys, lmdb
env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=16)
with env.begin() as txn:
    names = [bytes(key) for key, _ in txn.cursor()]
    for name in names:
        for _ in txn.cursor(db=env.open_db(name, txn=txn, create=False)):
            pass
"""


def index_walk_problem(directory: str, timeout_s: float = 300.0) -> str | None:
    """Read every key and value of an LMDB environment in a child process, or say why that
    failed: what LMDB would meet reading pages a crash left half written (SIGBUS, SIGSEGV,
    MDB_CORRUPTED) kills or fails the child, not this process. None also when it takes too
    long (a huge index: it is opened as it is)."""
    try:
        done = subprocess.run([sys.executable, "-c", _WALK, directory], capture_output=True,
                              timeout=timeout_s, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None
    if done.returncode < 0:
        return f"reading it killed a process with {signal.Signals(-done.returncode).name}"
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else f"reading it failed ({done.returncode})"
    return None
