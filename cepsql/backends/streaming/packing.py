"""Rows <-> the packed rows the stateful operator sees (light imports: this module is
unpickled in Spark's Python workers).

Each input batch becomes one packed row per PARTITION BY key: a *bucket* number, the
key's canonical identity (``kid``) and the key's rows as Arrow IPC bytes. The stateful
operator is keyed by the bucket, not the key, so each call to it (and each round trip to
Spark's state server: state get/update, timers) serves all the bucket's keys of a
micro-batch at once. The bucket and kid depend only on the key's value (never on the
process, the session time zone or the number of shuffle partitions), so a restarted query
finds every key's state where it left it."""
from __future__ import annotations

import math
import zlib
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.backends.streaming.ipc import from_bytes, to_bytes

ROWS_COLUMN = "__cep_rows"
OUT_COLUMN = "__cep_out"
LATE_COLUMN = "__cep_late"  # rows a stateful call dropped as late (late.py)
BUCKET_COLUMN = "__cep_bucket"
KID_COLUMN = "__cep_kid"
DEFAULT_BUCKETS = 8


def key_id(values: tuple) -> str:
    """A key's identity: equal PARTITION BY values (NULL = NULL, NaN = NaN, -0.0 = 0.0,
    as Spark groups them) give equal text in every process."""
    return repr(tuple(_canonical(v) for v in values))


def bucket_of(kid: str, buckets: int) -> int:
    return zlib.crc32(kid.encode("utf-8")) % buckets


def _canonical(value):
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return 0.0 if value == 0.0 else value
    return value


def _python_values(column: pa.Array) -> list:
    """Key values as Python values whose repr does not depend on the session (temporal
    types as their integer count, so no time zone enters the identity)."""
    t = column.type
    if pa.types.is_temporal(t) and getattr(t, "bit_width", 0) in (32, 64):
        column = column.view(pa.int32() if t.bit_width == 32 else pa.int64())
    return column.to_pylist()


#: rows a packer gathers from its task's input batches before it packs them: Spark hands
#: mapInArrow ~10k-row batches (arrow.maxRecordsPerBatch), and a blob per key and batch
#: made the stateful call read, decode and concatenate ~10 blobs per key per file (100k
#: rows: 200 blobs for 20 keys, ~0.1-0.3 s of the processor's input phase)
PACK_ROWS = 1 << 20


class RowPacker:
    """Picklable mapInArrow function: the task's input batches, gathered up to
    ``pack_rows`` rows at a time (0: each batch alone) -> one packed row per key
    (bucket, kid, the key's rows as Arrow IPC)."""

    def __init__(self, keys: list[str], buckets: int = DEFAULT_BUCKETS,
                 pack_rows: int = PACK_ROWS):
        self.keys = keys
        self.buckets = buckets
        self.pack_rows = pack_rows

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        gathered: list[pa.RecordBatch] = []
        rows = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            gathered.append(batch)
            rows += batch.num_rows
            if rows >= self.pack_rows:  # 0: every batch alone
                yield self._pack(pa.Table.from_batches(gathered))
                gathered, rows = [], 0
        if gathered:
            yield self._pack(pa.Table.from_batches(gathered))

    def _pack(self, table: pa.Table) -> pa.RecordBatch:
        if not self.keys:
            kids, blobs = [key_id(())], [to_bytes(table)]
        else:
            order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in self.keys])
            table = table.take(order)
            starts = group_starts(table, self.keys)
            ends = list(starts[1:]) + [table.num_rows]
            blobs = [to_bytes(table.slice(s, e - s)) for s, e in zip(starts, ends)]
            firsts = table.take(pa.array(starts, pa.int64()))
            columns = [_python_values(firsts.column(k).combine_chunks()) for k in self.keys]
            kids = [key_id(values) for values in zip(*columns)]
        return pa.RecordBatch.from_pydict({
            BUCKET_COLUMN: pa.array([bucket_of(k, self.buckets) for k in kids], pa.int32()),
            KID_COLUMN: pa.array(kids, pa.string()),
            ROWS_COLUMN: pa.array(blobs, pa.binary())})


def group_starts(table: pa.Table, keys: list[str]) -> np.ndarray:
    """Row offsets where a new key begins in table (sorted by keys)."""
    n = table.num_rows
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        col = table.column(k).combine_chunks()
        prev, cur = col.slice(0, n - 1), col.slice(1)
        differs = pc.fill_null(pc.not_equal(prev, cur), False)
        flip = pc.xor(pc.is_null(prev), pc.is_null(cur))
        change[1:] |= pc.or_(differs, flip).to_numpy(zero_copy_only=False)
    return np.flatnonzero(change)


class RowUnpacker:
    """Picklable mapInArrow function: IPC blobs of decided output rows -> the rows."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for blob in batch.column(batch.num_columns - 1).to_pylist():
                table = from_bytes(blob)
                if table is not None:
                    yield from table.to_batches()
