"""Stream blocks (dovecote.core.stream_blocks) as Arrow record batches in the source's schema:
each column is made from the block's buffers as they are (numpy for the few computed ones),
with no Python object per message. Map and stream bodies, rare here, are the exception: the
rows keep their Python form as text, as the row-by-row path gives them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]

from dovecote.core.message import BodyType
from dovecote.core.stream_blocks import BUFFERS, HEADER, MAGIC, OPTIONAL_STRINGS
from dovecote.protocol.openwire.primitives import decode_map, decode_stream_body


def _buffers(block: bytes) -> tuple[int, int, dict[str, pa.Buffer]]:
    magic, count, properties, k = HEADER.unpack_from(block)
    if magic != MAGIC or k != len(BUFFERS):
        raise ValueError("not a dovecote stream block (or one of another version)")
    lengths = np.frombuffer(block, "<u8", count=k, offset=HEADER.size).tolist()
    position = HEADER.size + 8 * k
    position += -position % 8
    whole = pa.py_buffer(block)
    parts: dict[str, pa.Buffer] = {}
    for name, length in zip(BUFFERS, lengths, strict=True):
        parts[name] = whole.slice(position, length)
        position += length + (-length % 8)
    if position > len(block) + 8:
        raise ValueError("a dovecote stream block cut short")
    return count, properties, parts


def _column(parts: dict[str, pa.Buffer], name: str, dtype: str) -> np.ndarray[Any, Any]:
    return np.frombuffer(parts[name], dtype)


def _validity(present: np.ndarray[Any, Any]) -> pa.Buffer:
    return pa.py_buffer(np.packbits(present.astype(bool), bitorder="little"))


def _strings(
    kind: pa.DataType, n: int, offsets: pa.Buffer, data: pa.Buffer, present: Any = None
) -> pa.Array:
    if present is None:
        return pa.Array.from_buffers(kind, n, [None, offsets, data], null_count=0)
    validity = _validity(present)
    nulls = n - int(np.count_nonzero(present))
    return pa.Array.from_buffers(kind, n, [validity, offsets, data], null_count=nulls)


def _times(ms: np.ndarray[Any, Any]) -> pa.Array:
    return pa.array(ms * 1000, type=pa.timestamp("us", tz="UTC"), mask=ms == 0)


def _python_bodies(body: pa.Array, kinds: np.ndarray[Any, Any]) -> pa.Array:
    """Map and stream bodies as their Python form, as text (the row-by-row path's value)."""
    values = body.to_pylist()
    for i in np.flatnonzero((kinds == BodyType.MAP) | (kinds == BodyType.STREAM)).tolist():
        content = values[i]
        decoded = decode_map(content) if kinds[i] == BodyType.MAP else decode_stream_body(content)
        values[i] = repr(decoded if content else ({} if kinds[i] == BodyType.MAP else [])).encode()
    return pa.array(values, type=pa.binary())


def record_batch(block: bytes, schema: pa.Schema) -> pa.RecordBatch:
    """One block as a record batch of ``schema`` (the source's, as Spark gives it to Arrow)."""
    n, m, parts = _buffers(block)
    kinds = _column(parts, "body_type", "u1")
    counters = _column(parts, "redelivery_counter", "<i4")
    present = {name: _column(parts, f"{name}_present", "u1") for name in OPTIONAL_STRINGS}
    body = _strings(pa.binary(), n, parts["body_offsets"], parts["body"])
    if np.any((kinds == BodyType.MAP) | (kinds == BodyType.STREAM)):
        body = _python_bodies(body, kinds)
    text = _strings(pa.string(), n, parts["body_offsets"], parts["body"], kinds == BodyType.TEXT)
    entries = pa.Array.from_buffers(pa.int32(), n + 1, [None, parts["entries"]], null_count=0)
    keys = _strings(pa.string(), m, parts["key_offsets"], parts["keys"])
    values = _strings(pa.string(), m, parts["value_offsets"], parts["values"])
    properties_type = schema.field("properties").type
    columns = {
        "message_id": _strings(pa.string(), n, parts["message_id_offsets"], parts["message_id"]),
        "destination": _strings(pa.string(), n, parts["destination_offsets"], parts["destination"]),
        "timestamp": _times(_column(parts, "timestamp", "<i8")),
        "expiration": _times(_column(parts, "expiration", "<i8")),
        "priority": pa.array(_column(parts, "priority", "<i4"), type=pa.int32()),
        "redelivered": pa.array(counters > 0, type=pa.bool_()),
        **{
            name: _strings(pa.string(), n, parts[f"{name}_offsets"], parts[name], present[name])
            for name in OPTIONAL_STRINGS
        },
        "properties": pa.MapArray.from_arrays(entries, keys, values, type=properties_type),
        "body": body,
        "text": text,
        "sequence": pa.array(_column(parts, "sequence", "<i8"), type=pa.int64()),
    }
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)
