"""The journal reads ahead the pages its appends go to (DataFiles.prepare): they are in the
page cache before the write, which then copies into them instead of waiting for new pages."""

from __future__ import annotations

import ctypes
import mmap
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from contract import Q, msg

from dovecote.store.api import AddMessage
from dovecote.store.journal import JournalPersistenceAdapter, datafiles
from dovecote.store.journal.records import FILE_HEADER
from dovecote.store.journal.threads import ReadAhead

MIB = 1024 * 1024


def resident_share(path: Path, start: int, end: int) -> float:
    """The share of a file's pages in [start, end) that are in the page cache (mincore(2)
    over a mapping of them, which itself reads nothing)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]  # fmt: skip
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = mmap.PAGESIZE
    first = start // page * page
    length = end - first
    pages = -(-length // page)
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, first)
        assert address not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            vector = ctypes.create_string_buffer(pages)
            assert libc.mincore(address, length, vector) == 0, os.strerror(ctypes.get_errno())
            return sum(byte & 1 for byte in vector.raw[:pages]) / pages
        finally:
            libc.munmap(address, length)
    finally:
        os.close(fd)


def soon_resident(path: Path, start: int, end: int, within_s: float = 10.0) -> float:
    """``resident_share`` once it reaches all of the range, or when ``within_s`` is up."""
    deadline = time.monotonic() + within_s
    while (share := resident_share(path, start, end)) < 1.0 and time.monotonic() < deadline:
        time.sleep(0.01)
    return share


def test_a_large_groups_range_is_read_ahead_in_a_file_rolled_for_it(tmp_path: Path) -> None:
    files = datafiles.DataFiles(tmp_path, 16 * MIB)
    files.open_for_append()
    first = files.path(files.current_id)
    files.append(b"x" * 4096)
    position = files.position
    files.prepare(MIB)  # small: left to its write
    files.prepare(datafiles.READ_AHEAD_MIN)  # fits in the file
    end = position + datafiles.READ_AHEAD_MIN
    assert files.current_id == 1
    assert soon_resident(first, position, end) == 1.0
    # A fresh preallocated file: nothing of it is in the page cache until read or written.
    assert resident_share(first, end, 16 * MIB) < 0.1

    # A group that will not fit starts its file before it is encoded, one preallocated to
    # hold it, and the range it goes to is read ahead there.
    files.prepare(40 * MIB)
    assert files.current_id == 2 and files.position == FILE_HEADER.size
    second = files.path(2)
    assert os.stat(second).st_size >= files.position + 40 * MIB
    assert soon_resident(second, files.position, files.position + 40 * MIB) == 1.0
    files.append(b"y" * (40 * MIB))
    assert files.current_id == 2  # written where it was prepared for
    files.close()
    assert os.stat(second).st_size == FILE_HEADER.size + 40 * MIB


async def test_the_store_reads_ahead_for_a_large_group_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, int, int]] = []
    real_read = ReadAhead.read

    def recorded(self: ReadAhead, path: Path, start: int, end: int) -> None:
        asked.append((path.name, start, end))
        real_read(self, path, start, end)

    monkeypatch.setattr(ReadAhead, "read", recorded)
    store = JournalPersistenceAdapter(tmp_path, max_file_length=4 * MIB)
    await store.start()
    try:
        await store.write([AddMessage(replace(msg(1), body=b"z" * 65536))])
        assert asked == []
        body = b"w" * MIB
        await store.write([AddMessage(replace(msg(i), body=body)) for i in range(2, 12)])
        ((name, start, end),) = asked
        assert (name, start) == ("db-2.log", FILE_HEADER.size)
        assert end - start >= 10 * MIB
        assert [m.message_id for m in store.recover().queues[Q]] == [
            msg(i).message_id for i in range(1, 12)
        ]
    finally:
        await store.stop()
