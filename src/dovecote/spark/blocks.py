"""Stream blocks (dovecote.core.stream_blocks) as Arrow record batches in the source's schema,
and record batches to write as blocks for ``Append`` requests:
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


def _compute() -> Any:
    """pyarrow.compute, imported when first needed: only writes need it, and a streaming
    query's driver-side reader, which waits for it at the query's start, never writes."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    return pc


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


BLOCK_ROWS_BYTES = 4 << 20
"""About how much body an Append block holds (as the broker's Blocks replies)."""


def _variable(column: pa.Array) -> tuple[Any, Any, Any]:
    """A string or binary column as a block's presence bytes, i32 offsets and data."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.type != pa.binary():
        column = column.cast(pa.binary())
    n = len(column)
    _, offsets_buffer, data_buffer = column.buffers()
    if n == 0 or offsets_buffer is None:
        return np.zeros(n, "u1"), np.zeros(n + 1, "<i4"), b""
    offsets = np.frombuffer(offsets_buffer, "<i4", count=n + 1, offset=4 * column.offset)
    start, end = int(offsets[0]), int(offsets[-1])
    data = data_buffer[start:end] if data_buffer is not None else b""
    present = column.is_valid().to_numpy(zero_copy_only=False).astype("u1")
    return present, (offsets - start).astype("<i4"), data


def _body(batch: pa.RecordBatch) -> tuple[pa.Array, np.ndarray[Any, Any]]:
    """Each row's body, from ``text``, else ``body``, else ``value`` (the first not null),
    and its body type (text, or bytes for a binary column)."""
    candidates: list[tuple[pa.Array, bool]] = []
    for name in ("text", "body", "value"):
        if name in batch.schema.names:
            column = batch.column(name)
            binary = pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)
            if not binary and not pa.types.is_string(column.type):
                column = column.cast(pa.string())  # a value of another type goes as its text
            candidates.append((column.cast(pa.binary()), not binary))
    chosen = np.full(batch.num_rows, -1, "i4")
    for i, (column, _) in enumerate(candidates):
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        chosen[(chosen == -1) & valid] = i
    if not candidates or (chosen == -1).any():
        raise ValueError("a row to send needs a text, body or value column")
    texts = np.array([is_text for _, is_text in candidates])
    kinds = np.where(texts[chosen], int(BodyType.TEXT), int(BodyType.BYTES)).astype("u1")
    columns = [column for column, _ in candidates]
    body = columns[0] if len(columns) == 1 else _compute().coalesce(*columns)
    return body, kinds


def _property_map(batch: pa.RecordBatch, names: list[str]) -> list[Any]:
    """The property columns (strings) as the block's map: entry offsets, keys, values."""
    n = batch.num_rows
    if not names:
        return [np.zeros(n + 1, "<i4"), np.zeros(1, "<i4"), b"", np.zeros(1, "<i4"), b""]
    columns = [batch.column(name).cast(pa.binary()) for name in names]
    valid = np.stack([c.is_valid().to_numpy(zero_copy_only=False) for c in columns], axis=1)
    rows, which = np.nonzero(valid)  # row by row, in the columns' order
    entries = np.concatenate([[0], np.cumsum(valid.sum(axis=1))]).astype("<i4")
    values = pa.concat_arrays(columns).take(pa.array(which * n + rows))
    keys = pa.array([name.encode() for name in names], pa.binary()).take(pa.array(which))
    _, key_offsets, key_data = _variable(keys)
    _, value_offsets, value_data = _variable(values)
    return [entries, key_offsets, key_data, value_offsets, value_data]


def append_block(
    batch: pa.RecordBatch,
    first_id: str,
    priority: int,
    time_to_live: int,
    property_columns: list[str],
    now_ms: int,
) -> bytes:
    """A batch of rows to send as one stream block for an ``Append`` request, made from
    the columns' buffers: message ids ``first_id`` followed by 1, 2, ... (a producer id and
    its sequence, as a client's producer makes them); correlation_id
    and type from those columns when the batch has them; the property columns (strings)
    as properties."""
    n = batch.num_rows
    names = batch.schema.names
    pc = _compute()
    ids = pc.binary_join_element_wise(
        first_id, pc.cast(pa.array(np.arange(1, n + 1)), pa.string()), ""
    )
    body, kinds = _body(batch)
    absent = pa.nulls(n, pa.string())
    optional = [
        _variable(batch.column(name) if name in names else absent)
        for name in ("correlation_id", "type")
    ]
    optional.append(_variable(absent))  # reply_to
    expiration = now_ms + time_to_live if time_to_live > 0 else 0
    _, id_offsets, id_data = _variable(ids)
    _, body_offsets, body_data = _variable(body)
    raw: list[Any] = [
        np.zeros(n, "<i8"),  # sequence: the broker's to give
        np.full(n, now_ms, "<i8"),
        np.full(n, expiration, "<i8"),
        np.full(n, priority, "<i4"),
        kinds,
        np.zeros(n, "<i4"),  # redelivery_counter
        *(present for present, _, _ in optional),
        id_offsets, id_data,
        np.zeros(n + 1, "<i4"), b"",  # destination: the request names it
        *(part for _, offsets, data in optional for part in (offsets, data)),
        body_offsets, body_data,
        *_property_map(batch, property_columns),
    ]  # fmt: skip
    views = [memoryview(part).cast("B") for part in raw]
    assert len(views) == len(BUFFERS)
    head = HEADER.pack(MAGIC, n, int(len(views[-4]) // 4) - 1, len(views))
    head += np.array([len(v) for v in views], "<u8").tobytes()
    parts: list[Any] = [head, bytes(-len(head) % 8)]
    for view in views:
        parts += [view, bytes(-len(view) % 8)]
    return b"".join(parts)


def append_blocks(batch: pa.RecordBatch, block_bytes: int = BLOCK_ROWS_BYTES) -> list[Any]:
    """``batch`` cut into runs of rows of about ``block_bytes`` each."""
    if batch.num_rows == 0:
        return []
    rows = max(1, int(batch.num_rows * block_bytes // max(1, batch.nbytes)))
    return [batch.slice(start, rows) for start in range(0, batch.num_rows, rows)]
