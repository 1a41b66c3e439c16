"""The journal reads ahead the pages its appends go to (DataFiles.prepare): they are in the
page cache before the write, which then copies into them instead of waiting for new pages."""

from __future__ import annotations

import ctypes
import mmap
import os
import time
from dataclasses import replace
from pathlib import Path

from contract import msg

from dovecote.store.api import AddMessage
from dovecote.store.journal import JournalPersistenceAdapter, datafiles
from dovecote.store.journal.records import FILE_HEADER

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


def test_the_range_appends_go_to_is_read_ahead_and_a_group_too_big_for_the_file_rolls_first(
    tmp_path: Path,
) -> None:
    files = datafiles.DataFiles(tmp_path, 16 * MIB)
    files.open_for_append()
    first = files.path(files.current_id)
    # A fresh preallocated file: nothing of it is in the page cache until read or written.
    assert resident_share(first, 4 * MIB, 8 * MIB) < 0.1
    files.append(b"x" * 4096)
    files.prepare(MIB)
    position = files.position
    assert soon_resident(first, position, position + MIB + datafiles.READ_AHEAD) == 1.0

    # Its pages read ahead, a group that will not fit starts its file before it is encoded,
    # one preallocated to hold it.
    files.prepare(40 * MIB)
    assert files.current_id == 2 and files.position == FILE_HEADER.size
    second = files.path(2)
    assert os.stat(second).st_size >= files.position + 40 * MIB
    assert soon_resident(second, files.position, files.position + 40 * MIB) == 1.0
    files.append(b"y" * (40 * MIB))
    assert files.current_id == 2  # written where it was prepared for
    files.close()
    assert os.stat(second).st_size == FILE_HEADER.size + 40 * MIB


async def test_the_store_reads_ahead_of_its_writes(tmp_path: Path) -> None:
    store = JournalPersistenceAdapter(tmp_path, max_file_length=32 * MIB)
    await store.start()
    try:
        await store.write([AddMessage(replace(msg(1), body=b"z" * 65536))])
        files = store._files
        assert files is not None
        path, head = files.path(files.current_id), files.position
        assert soon_resident(path, head, head + datafiles.READ_AHEAD // 2) == 1.0
    finally:
        await store.stop()
