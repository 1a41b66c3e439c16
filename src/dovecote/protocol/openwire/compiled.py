"""The field tables of schema.py compiled into straight-line Python: one reader and one writer
per structure and protocol version, generated the first time a version is used.

Why generate code: a loop over the tables spent most of an OpenWire broker's time deciding
what to do next (a call and a ``match`` per field, some 35 fields per message, twice per
message for a send and a dispatch). The generated functions do only the reading and writing:
runs of fixed-width fields (bool, byte, short, int, long) are one ``struct`` call, the
position is a local variable, and each field is one dictionary store.

Bounds: indexing past the end raises IndexError and ``unpack_from`` raises struct.error;
``Marshaller.parse_body`` turns both into a RemoteProtocolError. Slices do not fail when they
run short, so every variable-length field checks its end explicitly.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final, TypeVar, cast

from dovecote.core.errors import RemoteProtocolError
from dovecote.core.records import pickle_by_fields
from dovecote.protocol.openwire.mutf8 import decode_mutf8, encode_mutf8
from dovecote.protocol.openwire.schema import (
    COMMANDS,
    CONNECTION_ID,
    CONSUMER_ID,
    DESTINATION_TYPES,
    PRODUCER_ID,
    SCHEMAS,
    SESSION_ID,
    fields_for,
)

MAGIC: Final = b"ActiveMQ"
MAX_DEPTH: Final = 16

_FIXED: Final = {"bool": "?", "byte": "b", "short": "h", "int": "i", "long": "q"}
_UH = struct.Struct(">H")
_H = struct.Struct(">h")
_I = struct.Struct(">i")


@dataclass(slots=True, init=False)
class Structure:
    """One OpenWire data structure: its type code and its fields by their Java names.
    Missing fields read as None and are written as their kind's default. (Several are built
    per message: the ``__init__`` is written out, as core/records.py says why.)"""

    type: int
    fields: dict[str, Any] = field(default_factory=dict)

    def __init__(self, type: int, fields: dict[str, Any] | None = None) -> None:
        self.type = type
        self.fields = {} if fields is None else fields

    def __getitem__(self, name: str) -> Any:
        return self.fields.get(name)

    def get(self, name: str, default: Any = None) -> Any:
        value = self.fields.get(name)
        return default if value is None else value


@dataclass(slots=True)
class Throwable:
    class_name: str
    message: str | None
    stack: list[tuple[str, str, str, int]] = field(default_factory=list)
    cause: Throwable | None = None


Reader = Callable[[bytes, int, int, bool], tuple[Structure, int]]
"""(data, position, depth, stack traces on) -> (structure, position after it)."""
Writer = Callable[[bytearray, dict[str, Any], bool], None]
"""(output, fields, stack traces on): appends the structure's body."""


F = TypeVar("F")


class _OnFirstUse(dict[int, F]):
    """Functions by type code, each generated when first asked for: a client uses a dozen
    of the fifty structures, and compiling all of them at once costs peak memory for
    nothing."""

    def __init__(self, build: Callable[[int], F]) -> None:
        super().__init__()
        self._build = build

    def __missing__(self, code: int) -> F:
        if code not in SCHEMAS:
            raise KeyError(code)
        made = self[code] = self._build(code)
        return made


@dataclass(frozen=True, slots=True)
class Layouts:
    readers: dict[int, Reader]
    """Look up with ``[]`` (a miss generates): KeyError means no such structure."""
    writers: dict[int, Writer]


def _short() -> RemoteProtocolError:
    return RemoteProtocolError("OpenWire structure runs past the end of its frame")


@cache
def layouts(version: int) -> Layouts:
    """The readers and writers of every structure as ``version`` lays it out."""
    readers: dict[int, Reader] = _OnFirstUse(lambda code: cast(Reader, generate(code, "read")))
    writers: dict[int, Writer] = _OnFirstUse(lambda code: cast(Writer, generate(code, "write")))

    # Ids and destinations: every message and ack carries several, mostly the same few
    # (its producer, its consumer, its destination). Each is read and written once and then
    # found by its bytes or its fields; the cache starts again when it grows too big.
    tails = value_tails(version)
    values_read: dict[bytes, Structure] = {}
    values_written: dict[tuple[Any, ...], bytes] = {}

    # Helpers the generated code calls for the less common field kinds.
    def nested(data: bytes, pos: int, depth: int, st: bool) -> tuple[Structure, int]:
        code = data[pos]
        tail = tails.get(code)
        if tail is not None and data[pos + 1]:
            (n,) = _UH.unpack_from(data, pos + 2)
            end = pos + 4 + n + tail
            if end > len(data):
                raise _short()
            raw = data[pos:end]
            known = values_read.get(raw)
            if known is None:
                known, after = readers[code](data, pos + 1, depth + 1, st)
                assert after == end, (code, after, end)
                if len(values_read) >= _VALUE_CACHE_SIZE:
                    values_read.clear()
                values_read[raw] = known
            # A copy: whoever receives it may add to its fields.
            return Structure(code, known.fields.copy()), end
        try:
            reader = readers[code]
        except KeyError:
            raise RemoteProtocolError(f"unknown OpenWire data structure type {code}") from None
        return reader(data, pos + 1, depth + 1, st)

    def array(data: bytes, pos: int, depth: int, st: bool) -> tuple[list[Any], int]:
        (count,) = _H.unpack_from(data, pos)
        pos += 2
        if count < 0 or count > len(data) - pos:
            raise RemoteProtocolError(f"bad OpenWire array length {count}")
        items: list[Any] = []
        for _ in range(count):
            if data[pos]:
                item, pos = nested(data, pos + 1, depth + 1, st)
                items.append(item)
            else:
                items.append(None)
                pos += 1
        return items, pos

    def write_nested(out: bytearray, value: Structure, st: bool) -> None:
        if value.type in tails:
            key = (value.type, *value.fields.items())
            raw = values_written.get(key)
            if raw is None:
                encoded = bytearray((1, value.type))
                writers[value.type](encoded, value.fields, st)
                if len(values_written) >= _VALUE_CACHE_SIZE:
                    values_written.clear()
                raw = values_written[key] = bytes(encoded)
            out += raw
            return
        try:
            writer = writers[value.type]
        except KeyError:
            raise ValueError(f"no OpenWire schema for type {value.type}") from None
        out.append(1)
        out.append(value.type)
        writer(out, value.fields, st)

    def write_array(out: bytearray, items: list[Structure | None], st: bool) -> None:
        out.append(1)
        out += _H.pack(len(items))
        for item in items:
            if item is None:
                out.append(0)
            else:
                write_nested(out, item, st)

    namespace: dict[str, Any] = {
        "Structure": Structure,
        "RemoteProtocolError": RemoteProtocolError,
        "MAGIC": MAGIC,
        "MAX_DEPTH": MAX_DEPTH,
        "_short": _short,
        "_utf": decode_mutf8,
        "_put_utf": _put_utf,
        "_UH": _UH.unpack_from,
        "_I": _I.unpack_from,
        "_pack_I": _I.pack,
        "_nested": nested,
        "_array": array,
        "_throwable": read_throwable,
        "_put_nested": write_nested,
        "_put_array": write_array,
        "_put_throwable": write_throwable,
    }

    def generate(code: int, verb: str) -> Any:
        fields = fields_for(code, version)
        if code in COMMANDS:
            fields = (("commandId", "int"), ("responseRequired", "bool"), *fields)
        make = _reader_source if verb == "read" else _writer_source
        source = "\n".join(make(code, fields, namespace))
        exec(compile(source, f"<openwire v{version} {verb} {code}>", "exec"), namespace)
        return namespace[f"{verb}_{code}"]

    return Layouts(readers, writers)


_VALUE_CACHE_SIZE: Final = 4096


def value_tails(version: int) -> dict[int, int]:
    """The structures that are values (ids, destinations): a string and then only numbers.
    For each, the size of the numbers after the string, which with the string's length
    gives where it ends before reading it."""
    tails: dict[int, int] = {}
    for code in (*DESTINATION_TYPES, CONNECTION_ID, SESSION_ID, CONSUMER_ID, PRODUCER_ID):
        fields = fields_for(code, version)
        first, rest = fields[0], fields[1:]
        if first[1] == "string" and all(kind in _FIXED for _, kind in rest):
            tails[code] = struct.calcsize(">" + "".join(_FIXED[kind] for _, kind in rest))
    return tails


def _runs(fields: tuple[tuple[str, str], ...]) -> list[list[tuple[str, str]]]:
    """Consecutive fixed-width fields grouped together; every other field on its own."""
    runs: list[list[tuple[str, str]]] = []
    for name, kind in fields:
        if kind in _FIXED and runs and runs[-1][0][1] in _FIXED:
            runs[-1].append((name, kind))
        else:
            runs.append([(name, kind)])
    return runs


def _struct_name(run: list[tuple[str, str]], namespace: dict[str, Any], verb: str) -> str:
    fmt = ">" + "".join(_FIXED[kind] for _, kind in run)
    name = f"_{verb}_{fmt[1:].replace('?', 'z')}"
    namespace[name] = getattr(struct.Struct(fmt), verb)
    return name


def _reader_source(
    code: int, fields: tuple[tuple[str, str], ...], namespace: dict[str, Any]
) -> list[str]:
    lines = [
        f"def read_{code}(data, pos, depth, st):",
        "    if depth > MAX_DEPTH:",
        "        raise RemoteProtocolError('OpenWire structures nested too deeply')",
        "    f = {}",
    ]
    for run in _runs(fields):
        name, kind = run[0]
        key = repr(name)
        if kind in _FIXED:
            unpack = _struct_name(run, namespace, "unpack_from")
            targets = "".join(f"f[{n!r}], " for n, _ in run)
            size = struct.calcsize(">" + "".join(_FIXED[k] for _, k in run))
            lines += [f"    ({targets}) = {unpack}(data, pos)", f"    pos += {size}"]
        elif kind == "magic":
            lines += [
                f"    f[{key}] = magic = data[pos:pos + 8]",
                "    pos += 8",
                "    if magic != MAGIC:",
                "        raise RemoteProtocolError(f'bad OpenWire magic {magic!r}')",
            ]
        elif kind == "throwable":
            lines.append(f"    f[{key}], pos = _throwable(data, pos, depth, st)")
        else:
            # Every other kind starts with a "not null" flag.
            lines.append("    if data[pos]:")
            if kind == "string":
                lines += [
                    "        (n,) = _UH(data, pos + 1)",
                    "        start = pos + 3",
                    "        pos = start + n",
                    "        if pos > len(data):",
                    "            raise _short()",
                    f"        f[{key}] = _utf(data[start:pos])",
                ]
            elif kind == "bytes":
                lines += [
                    "        (n,) = _I(data, pos + 1)",
                    "        start = pos + 5",
                    "        pos = start + n",
                    "        if n < 0 or pos > len(data):",
                    "            raise _short()",
                    f"        f[{key}] = data[start:pos]",
                ]
            elif kind in ("nested", "cached"):
                lines.append(f"        f[{key}], pos = _nested(data, pos + 1, depth, st)")
            elif kind == "array":
                lines.append(f"        f[{key}], pos = _array(data, pos + 1, depth, st)")
            else:
                raise AssertionError(kind)
            lines += ["    else:", f"        f[{key}] = None", "        pos += 1"]
    lines += [f"    return Structure({code}, f), pos", ""]
    return lines


def _writer_source(
    code: int, fields: tuple[tuple[str, str], ...], namespace: dict[str, Any]
) -> list[str]:
    lines = [f"def write_{code}(out, f, st):", "    g = f.get"]
    for run in _runs(fields):
        name, kind = run[0]
        key = repr(name)
        if kind in _FIXED:
            pack = _struct_name(run, namespace, "pack")
            # A missing (or None) number is written as 0; "?" packs any value's truth.
            values = ", ".join(f"g({n!r})" if k == "bool" else f"g({n!r}) or 0" for n, k in run)
            lines.append(f"    out += {pack}({values})")
        elif kind == "magic":
            lines.append(f"    out += g({key}) or MAGIC")
        elif kind == "throwable":
            lines.append(f"    _put_throwable(out, g({key}), st)")
        else:
            lines += [f"    v = g({key})", "    if v is None:", "        out.append(0)"]
            if kind == "string":
                lines += ["    else:", "        _put_utf(out, v)"]
            elif kind == "bytes":
                lines += [
                    "    else:",
                    "        out.append(1)",
                    "        out += _pack_I(len(v))",
                    "        out += v",
                ]
            elif kind in ("nested", "cached"):
                lines += ["    else:", "        _put_nested(out, v, st)"]
            elif kind == "array":
                lines += ["    else:", "        _put_array(out, v, st)"]
            else:
                raise AssertionError(kind)
    lines.append("")
    return lines


def _put_utf(out: bytearray, text: str) -> None:
    out += utf_field(text)


def utf_field(text: str) -> bytes:
    """A non-null string field: the flag, Java's writeUTF length and modified UTF-8."""
    data = encode_mutf8(text)
    if len(data) > 0xFFFF:
        raise ValueError(f"string of {len(data)} bytes is too long for a Java UTF field")
    return b"\x01" + _UH.pack(len(data)) + data


def _read_utf(data: bytes, pos: int) -> tuple[str | None, int]:
    if not data[pos]:
        return None, pos + 1
    (n,) = _UH.unpack_from(data, pos + 1)
    start = pos + 3
    end = start + n
    if end > len(data):
        raise _short()
    return decode_mutf8(data[start:end]), end


def read_throwable(data: bytes, pos: int, depth: int, st: bool) -> tuple[Throwable | None, int]:
    if not data[pos]:
        return None, pos + 1
    if depth > MAX_DEPTH:
        raise RemoteProtocolError("OpenWire exceptions nested too deeply")
    class_name, pos = _read_utf(data, pos + 1)
    message, pos = _read_utf(data, pos)
    t = Throwable(class_name or "", message)
    if st:
        (frames,) = _H.unpack_from(data, pos)
        pos += 2
        if frames < 0 or frames > len(data) - pos:
            raise RemoteProtocolError(f"bad stack trace length {frames}")
        for _ in range(frames):
            declaring, pos = _read_utf(data, pos)
            method, pos = _read_utf(data, pos)
            file, pos = _read_utf(data, pos)
            (line,) = _I.unpack_from(data, pos)
            pos += 4
            t.stack.append((declaring or "", method or "", file or "", line))
        t.cause, pos = read_throwable(data, pos, depth + 1, st)
    return t, pos


def write_throwable(out: bytearray, t: Throwable | None, st: bool) -> None:
    if t is None:
        out.append(0)
        return
    out.append(1)
    _put_utf(out, t.class_name)
    if t.message is None:
        out.append(0)
    else:
        _put_utf(out, t.message)
    if st:
        out += _H.pack(len(t.stack))
        for declaring, method, file, line in t.stack:
            for text in (declaring, method, file):
                _put_utf(out, text)
            out += _I.pack(line)
        write_throwable(out, t.cause, st)


pickle_by_fields(__name__)
