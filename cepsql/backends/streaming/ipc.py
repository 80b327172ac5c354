"""Arrow IPC bytes <-> tables: how rows travel through the shuffle and live in state (and
reading a stored state row)."""
from __future__ import annotations

import struct

import pyarrow as pa

from cepsql.errors import CepRuntimeError

# LZ4-framed buffers: a micro-batch's rows wait in state for the next watermark, so every
# byte is pickled to the JVM, written to RocksDB and its changelog, and read back; LZ4
# halves them (ticks: 3.2 -> 1.65 MB per micro-batch) for ~1 ms per 6k rows. Readers
# need no option (the stream says it is compressed), so uncompressed state still reads.
_WRITE_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


def to_bytes(table: pa.Table | None) -> bytes:
    if table is None or table.num_rows == 0:
        return b""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_WRITE_OPTIONS) as writer:
        writer.write_table(table.combine_chunks())  # one record batch: no per-chunk header
    return sink.getvalue().to_pybytes()


def from_bytes(data: bytes | None) -> pa.Table | None:
    if not data:
        return None
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def concat(a: pa.Table | None, b: pa.Table | None) -> pa.Table | None:
    if a is None or a.num_rows == 0:
        return b
    if b is None or b.num_rows == 0:
        return a
    return pa.concat_tables([a, b.cast(a.schema)])


# --- checkpoint safety ----------------------------------------------------------------
# The layout of cepsql's streaming state values (processor.encode_keys, the workload's
# STATE_SCHEMA). Bump it whenever what is stored changes: a checkpoint written with
# another layout is refused instead of misread.
STATE_LAYOUT_VERSION = 3
_MAGIC = b"CEPS"
_LAYOUT = struct.Struct("<4sII")   # magic, layout version, key buckets


def layout_header(buckets: int) -> bytes:
    """What every stored state value starts with: the layout version and the number of
    key buckets (cepsql.streaming.keyBuckets) the keys were spread over."""
    return _LAYOUT.pack(_MAGIC, STATE_LAYOUT_VERSION, buckets)


def check_layout(data: bytes, buckets: int | None) -> int:
    """Raise CepRuntimeError unless data was written by this layout with ``buckets``
    key buckets (None: any); returns the header's size."""
    head = bytes(data[:_LAYOUT.size])
    magic, version, stored = _LAYOUT.unpack(head) if len(head) == _LAYOUT.size \
        else (b"", 0, 0)
    if magic != _MAGIC or version != STATE_LAYOUT_VERSION:
        raise CepRuntimeError(
            "the checkpoint's cepsql streaming state was written by another state layout "
            f"({'version ' + str(version) if magic == _MAGIC else 'an older cepsql'}; this "
            f"cepsql reads version {STATE_LAYOUT_VERSION}): start the query from a new "
            "checkpoint location")
    if buckets is not None and stored != buckets:
        raise CepRuntimeError(
            f"the checkpoint's cepsql streaming state was written with "
            f"cepsql.streaming.keyBuckets={stored}, but the query now runs with {buckets}: "
            f"set cepsql.streaming.keyBuckets back to {stored}, or start the query from a "
            "new checkpoint location")
    return _LAYOUT.size


def stored_value(state) -> tuple | None:
    """The row a ``ValueState`` holds, or None when it holds none. Asks ``exists()``
    first: ``get()`` on an empty state makes Spark's state server log a WARN ("Value state
    ... doesn't contain a value") for every new key, which no user caused."""
    return state.get() if state.exists() else None
