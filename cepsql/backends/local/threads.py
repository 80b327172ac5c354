"""The partitions' evaluators on all cores: the sorted input is cut at PARTITION BY group
boundaries into about two slices per core, and each slice streams through its own copy of
the bound worker in a thread. The Cython evaluators release the GIL and keep no
module-level state, so the slices run in parallel; outputs are concatenated in slice order,
and since match numbers restart per partition the result equals the one-thread run.

The sort: with one PARTITION BY column whose distinct values are its groups (strings,
integers, booleans, dates, timestamps), rows are grouped by the rank of their partition
value (a counting sort over small integers) and each thread sorts only its slice, by that
rank then ORDER BY and the tie-breakers (``run_by_partition``); otherwise the input is
sorted once and cut at group boundaries (``run_worker``). Both sorts are Arrow's
(sql.sort_indices: NaN greatest, NULL placement per key). DuckDB's multi-threaded
ORDER BY was measured slower on this machine (1M ticks by symbol, ts: 1.5 s for the
table, 0.94 s for the permutation only, against 0.63 s with Arrow), so it is not used."""
from __future__ import annotations

import copy
import functools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.exprs.arrow_eval import spark_compare
from cepsql.compile.query_plan import BoundPlan, SortColumn
from cepsql.backends.local.sequence import SequenceShape, run_sequence
from cepsql.runtime.run_stats import ClauseStatistics
from cepsql.runtime.worker import MatchWorker

__all__ = ["run_worker", "slice_bounds", "default_threads", "partition_ranks",
           "run_by_partition", "KnownEncodings"]

# below this many rows per slice a thread costs more than it saves
MIN_SLICE_ROWS = 16_384


@functools.cache
def default_threads() -> int:
    """Threads for the evaluators unless the caller says (PlannerOptions.threads): the
    machine's cores (asked once: os.cpu_count reads /proc on every call)."""
    return os.cpu_count() or 1


def run_worker(ordered: pa.Table, bound: BoundPlan, partition_columns: list[str], *,
               batch_rows: int = 65536, threads: int | None = None,
               shape: SequenceShape | None = None,
               stats: ClauseStatistics | None = None) -> pa.Table:
    """The worker's output over ordered (partitions contiguous and sorted), computed on up
    to ``threads`` threads (by the sequence fast path when shape is given); the
    evaluators' counters go to stats. Unpartitioned inputs run on one slice."""
    threads = default_threads() if threads is None else max(1, threads)
    bounds = [0, ordered.num_rows]
    if threads > 1 and partition_columns:
        bounds = slice_bounds(ordered, partition_columns, 2 * threads,
                              min_rows=MIN_SLICE_ROWS)
    pieces = [ordered.slice(lo, hi - lo) for lo, hi in zip(bounds, bounds[1:])]
    workers = [copy.copy(bound.worker) for _ in pieces]  # per-slice state (last_stats)
    outs = _on_threads(lambda k: _run_one(workers[k], pieces[k], bound.worker_schema,
                                          batch_rows, shape), workers, threads)
    _record_stats(workers, stats)
    return outs[0] if len(outs) == 1 else pa.concat_tables(outs)


def _on_threads(one: Callable[[int], pa.Table], workers: list, threads: int
                ) -> list[pa.Table]:
    """[one(k) for each slice k] on up to ``threads`` threads (in this thread when there
    is one slice). Ctrl-C reaches only the main thread, so the slices' workers share a
    cancel flag their evaluators watch (cepsql/_ext/interrupt.pxd): when this thread is
    interrupted, or a slice fails, it is set and the queued slices dropped, and the
    running ones stop within a check interval instead of running to completion."""
    if len(workers) == 1:
        return [one(0)]
    cancel = np.zeros(1, dtype=np.uint8)
    for w in workers:
        w.cancel = cancel
    pool = ThreadPoolExecutor(max_workers=min(threads, len(workers)),
                              thread_name_prefix="cepsql-worker")
    try:
        return list(pool.map(one, range(len(workers))))
    except BaseException:
        cancel[0] = 1
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)


def _run_one(worker, piece: pa.Table, schema: pa.Schema, batch_rows: int,
             shape: SequenceShape | None = None) -> pa.Table:
    if shape is not None:
        return run_sequence(worker, piece, shape)
    batches: Iterator[pa.RecordBatch] = iter(piece.to_batches(max_chunksize=batch_rows))
    return pa.Table.from_batches(list(worker(batches)), schema=schema)


def _record_stats(workers: list, stats: ClauseStatistics | None) -> None:
    """The evaluators' counters of the slices' workers as one run's, into stats."""
    if stats is not None:
        stats.record([getattr(w, "last_stats", None) for w in workers])


def slice_bounds(table: pa.Table, partition_columns: list[str], slices: int, *,
                 min_rows: int = 1) -> list[int]:
    """Row offsets [0, ..., n] cutting table into at most ``slices`` pieces of whole
    PARTITION BY groups (of about equal size, none under min_rows unless it is the only
    one). Keys are compared as the worker compares them: NULL equals NULL, NaN equals NaN."""
    n = table.num_rows
    slices = max(1, min(slices, n // max(1, min_rows)))
    bounds = [0]
    for i in range(1, slices):
        target = max(bounds[-1] + 1, n * i // slices)
        if target >= n:
            break
        cut = _group_end(table, partition_columns, target)
        if cut >= n:
            break
        if cut > bounds[-1]:
            bounds.append(cut)
    bounds.append(n)
    return bounds


def _group_end(table: pa.Table, columns: list[str], row: int) -> int:
    """The first row at or after ``row`` that starts a new group (n if none): looks at a
    window after row that doubles until it finds a key change."""
    n = table.num_rows
    width = 256
    lo = row - 1
    while True:
        hi = min(n, lo + 1 + width)
        changed = _changes(table.slice(lo, hi - lo), columns)
        hits = np.flatnonzero(changed)
        if len(hits):
            return lo + 1 + int(hits[0])
        if hi >= n:
            return n
        width *= 2


def _changes(window: pa.Table, columns: list[str]) -> np.ndarray:
    """Per adjacent pair of rows: whether any key differs (NULLs equal, NaN equal NaN)."""
    m = window.num_rows
    changed = np.zeros(max(0, m - 1), dtype=bool)
    for name in columns:
        col = window.column(name).combine_chunks()
        if pa.types.is_null(col.type):
            continue  # all NULL: one group
        prev, cur = col.slice(0, m - 1), col.slice(1)
        differs = pc.fill_null(spark_compare("<>", prev, cur), False)
        null_flip = pc.xor(pc.is_null(prev), pc.is_null(cur))
        changed |= pc.or_(differs, null_flip).to_numpy(zero_copy_only=False)
    return changed


# --- sorting and running by partition -------------------------------------------------------

RANK_COLUMN = "__cep_prank"


class KnownEncodings:
    """Dictionary encodings of input columns made while converting them (the pandas
    conversion factorizes a PARTITION BY string column on its way to Arrow), for
    partition_ranks to use instead of encoding the column again. ``columns``: the
    names worth encoding (any case). An encoding is found by the exact array it
    encodes (its buffers, offset and length), and keeps that array alive, so no other
    array can be taken for it. One per call (never module-level)."""

    def __init__(self, columns: Iterable[str] = ()):
        self.columns = frozenset(name.lower() for name in columns)
        self._entries: dict[tuple, tuple[pa.Array, pa.DictionaryArray]] = {}

    def wants(self, name: str) -> bool:
        """Whether the column of this name is worth encoding while it is converted."""
        return name.lower() in self.columns

    def add(self, array: pa.Array, encoded: pa.DictionaryArray) -> None:
        """Note that ``encoded`` (no NULL index) dictionary-encodes ``array``."""
        self._entries[self._key(array)] = (array, encoded)

    def get(self, column) -> pa.DictionaryArray | None:
        """The encoding of a one-chunk column (or array) noted by add, or None."""
        if isinstance(column, pa.ChunkedArray):
            if column.num_chunks != 1:
                return None
            column = column.chunk(0)
        found = self._entries.get(self._key(column))
        return None if found is None else found[1]

    @staticmethod
    def _key(array: pa.Array) -> tuple:
        return (array.type, array.offset, len(array),
                tuple(0 if b is None else b.address for b in array.buffers()))


def partition_ranks(table: pa.Table, key: SortColumn, *, threads: int | None = None,
                    encodings: KnownEncodings | None = None) -> np.ndarray | None:
    """Per row, the rank of its PARTITION BY value in the key's order (NULL a value of its
    own, placed as the key says), or None when the column is not one whose distinct
    values are its groups (floating point: -0.0 equals 0.0 and NaN equals NaN there).
    The column's encoding is taken from ``encodings`` when it is there; otherwise large
    inputs are encoded in pieces on ``threads`` threads (Arrow's hashing releases the
    GIL) and the pieces' small dictionaries merged."""
    col = table.column(key.column)
    t = col.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
            or pa.types.is_boolean(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)):
        return None
    known = None if encodings is None else encodings.get(col)
    if known is not None:
        encoded = [known]
    else:
        threads = default_threads() if threads is None else max(1, threads)
        n = len(col)
        parts = max(1, min(threads, n // MIN_SLICE_ROWS))
        cuts = [n * i // parts for i in range(parts + 1)]
        pieces = [col.slice(lo, hi - lo) for lo, hi in zip(cuts, cuts[1:])]
        if len(pieces) > 1:
            with ThreadPoolExecutor(max_workers=len(pieces),
                                    thread_name_prefix="cepsql-encode") as pool:
                encoded = list(pool.map(_encode, pieces))
        else:
            encoded = [_encode(piece) for piece in pieces]
    if not encoded:
        return np.zeros(0, dtype=np.int32)
    # one piece: its dictionary holds each value once already
    merged = encoded[0].dictionary if len(encoded) == 1 else \
        pc.unique(pa.concat_arrays([e.dictionary for e in encoded]))
    rank_of_merged = _dictionary_ranks(merged, key)
    out = []
    for e in encoded:
        rank_of_code = rank_of_merged
        if len(encoded) > 1:
            where = pc.index_in(e.dictionary, value_set=merged, skip_nulls=False)
            rank_of_code = rank_of_merged[where.to_numpy(zero_copy_only=False)]
        out.append(rank_of_code[e.indices.to_numpy(zero_copy_only=False)])
    return np.concatenate(out) if len(out) > 1 else out[0]


def _dictionary_ranks(values: pa.Array, key: SortColumn) -> np.ndarray:
    """int32 rank of each of ``values`` (distinct, at most one NULL) in the key's order:
    Spark's order on these types is Arrow's (strings by their bytes), so one
    array_sort_indices gives it (no ties to break: the values are distinct), without
    runtime.ordering's general key table (0.1 ms of a 3,000-row call)."""
    order = pc.array_sort_indices(values, order="ascending" if key.ascending else "descending",
                                  null_placement="at_start" if key.nulls_first else "at_end"
                                  ).to_numpy()
    ranks = np.empty(len(order), dtype=np.int32)
    ranks[order] = np.arange(len(order), dtype=np.int32)
    return ranks


def _encode(col: pa.ChunkedArray) -> pa.DictionaryArray:
    """col dictionary-encoded as one array (NULL a dictionary value of its own). Chunks
    are combined first: Arrow cannot unify per-chunk dictionaries that encode NULL."""
    if isinstance(col, pa.ChunkedArray):  # one chunk: itself (combine_chunks copies)
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return pc.dictionary_encode(col, null_encoding="encode")


def run_by_partition(prepared: pa.Table, ranks: np.ndarray, bound: BoundPlan,
                     order_of: Callable[[pa.Table, np.ndarray, np.ndarray], np.ndarray | None],
                     *,
                     batch_rows: int = 65536, threads: int | None = None,
                     shape: SequenceShape | None = None,
                     stats: ClauseStatistics | None = None,
                     rank_column: str | None = None) -> pa.Table:
    """The worker's output over prepared, sorted and run slice by slice in threads: rows
    are grouped by partition rank (a counting sort), the groups cut into about two slices
    per thread, and each thread orders its slice with ``order_of(prepared, rows, ranks
    of rows)`` (positions into rows, by the ranks first, so partitions stay contiguous
    and in order; None when rows are in that order already) and streams them through
    its own copy of the worker: the sequence fast path reads the rows where they are,
    the general worker gets them taken once in that order. Outputs are concatenated in
    slice order; the evaluators' counters go to stats. ``rank_column`` names the column
    the ranks encode: when it is the worker's one PARTITION BY column, the worker is told
    where its groups change (from the ranks) instead of comparing the keys again."""
    threads = default_threads() if threads is None else max(1, threads)
    n = prepared.num_rows
    order = pc.sort_indices(pa.array(ranks, pa.int32())).to_numpy()  # counting sort
    bounds = [0]
    pieces = max(1, min(2 * threads, n // MIN_SLICE_ROWS))
    if threads > 1 and pieces > 1:
        ends = np.cumsum(np.bincount(ranks))
        for i in range(1, pieces):
            cut = int(ends[min(len(ends) - 1, np.searchsorted(ends, n * i // pieces))])
            if bounds[-1] < cut < n:
                bounds.append(cut)
    bounds.append(n)
    spans = list(zip(bounds, bounds[1:]))
    workers = [copy.copy(bound.worker) for _ in spans]

    sort_seconds = [0.0] * len(spans)  # thread time of each slice's sort (EXPLAIN ANALYZE)

    def one(k: int) -> pa.Table:
        started = time.perf_counter()
        rows = order[spans[k][0]:spans[k][1]]
        r = ranks[rows]
        within = order_of(prepared, rows, r)
        if within is not None:
            rows, r = rows[within], r[within]
        sort_seconds[k] = time.perf_counter() - started
        if shape is not None:  # the groups are where the rank changes; no gather
            starts = np.flatnonzero(r[1:] != r[:-1]) + 1 if len(r) else r
            starts = np.r_[0, starts] if len(r) else starts
            return run_sequence(workers[k], prepared, shape, starts, rows)
        ordered = prepared.take(pa.array(rows)).combine_chunks()
        _tell_groups(workers[k], ordered, rank_column, r)
        return _run_one(workers[k], ordered, bound.worker_schema, batch_rows, shape)
    outs = _on_threads(one, workers, threads)
    _record_stats(workers, stats)
    if stats is not None:
        stats.notes.append(f"each of the {len(spans)} slices sorted its own rows on its "
                           f"thread: {sum(sort_seconds):.3f} s of thread time, inside "
                           "the evaluation stage")
    return outs[0] if len(outs) == 1 else pa.concat_tables(outs)


def _tell_groups(worker, ordered: pa.Table, rank_column: str | None, ranks: np.ndarray
                 ) -> None:
    """Hand a slice's worker copy its group changes, read off the ranks of its rows (in
    ``ordered``'s order): equal ranks are equal keys under the worker's own equality
    (partition_ranks encodes only columns whose distinct values are its groups)."""
    config = getattr(worker, "config", None)
    if rank_column is None or not isinstance(worker, MatchWorker) \
            or list(getattr(config, "partition_columns", ())) != [rank_column] \
            or ordered.num_rows == 0:
        return
    changes = np.zeros(len(ranks), dtype=bool)
    changes[1:] = ranks[1:] != ranks[:-1]
    worker.know_group_changes(ordered.column(rank_column).chunk(0), changes)
