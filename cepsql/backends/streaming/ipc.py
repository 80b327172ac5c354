"""Arrow IPC bytes <-> tables: how rows travel through the shuffle and live in state."""
from __future__ import annotations

import pyarrow as pa

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
