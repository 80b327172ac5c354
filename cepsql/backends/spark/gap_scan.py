"""Gap pushdown for the ordered scan: under STRICT_CONTIGUITY only the rows some variable
may take cross from the JVM to Python; the rows dropped between them become breaks.

A contiguity run dies at a row no variable can take (analyze/relevance.py gap_filter),
and nothing else reads such a row, so it can be dropped before the Arrow transfer
provided the next kept row is flagged as a break (QueryPlan.break_column, which the CEP
evaluator honours: every run waiting there dies). The flag needs each kept row's place
in the whole input's ORDER BY order, which the JVM gives for free when every input
partition's file order is its sorted order: ``monotonically_increasing_id()`` in a
projection BELOW the filter (Spark pushes no filter through a nondeterministic
projection) numbers the rows of a partition (low 33 bits; partition id above), and the
global position is the partition's offset in the time-ordered layout plus that index.
A kept row breaks when its position is not the previous kept row's + 1.

So the planning job (``profile_rows`` over ``profile_input``) ships only the ORDER BY column to Python
(a JVM aggregate cannot see row adjacency) and returns, per input partition, its row
count, NULL times, range, and whether its times strictly increase in file order (ties ->
no: the tie-breakers would reorder them): facts about the files alone, which
profile_cache.py keeps per file set for every later query. Any partition with NULL or
unordered times: no pushdown (the ordered scan as before). The overlap rows (second job,
read without positions so that Parquet still skips row groups by time) get theirs from
where they sit: a prefix or a suffix of their partition (``overlap_positions``). The
query's filter also lets through each partition's first row and its rows from the
profiled last index on (``numbered``): the tasks check pid, strict order, range and that
their rows run from index 0 at the first time to count - 1 at the last (``ends_match``),
and fail loudly when the partitioning changed; then drop those check rows. (The profile
formerly also read the relevance flag to check the kept rows' count and index range:
0.3 s more at 5M rows, and a profile per query instead of per file set.)
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cepsql.algebra.expressions import ColumnRef, walk
from cepsql.exprs.spark_sql import quote_identifier
from cepsql.compile.worker_config import CepConfig, WorkerConfig

POSITION_COLUMN = "__cep_scan_pos"  # monotonically_increasing_id(), then the global position
_INDEX_BITS = 33
_INDEX_MASK = (1 << _INDEX_BITS) - 1
_PROFILE_SCHEMA = pa.schema([("pid", pa.int32()), ("n", pa.int64()), ("nulls", pa.int64()),
                             ("lo", pa.int64()), ("hi", pa.int64()), ("strict", pa.bool_())])
_RELEVANT = "__cep_scan_relevant"


@dataclass(frozen=True)
class PartitionProfile:
    """One input partition as the planning job saw it (times as integers of the key's
    unit): facts about its files alone, whatever the query."""
    pid: int
    count: int     # rows with a time
    nulls: int     # rows without one
    lo: int
    hi: int
    strict: bool   # times strictly increase in file order

    @property
    def in_order(self) -> bool:
        return self.strict and not self.nulls


def profile_input(df: DataFrame, key: str) -> DataFrame:
    """What the planning job reads: df's ``key`` (profile_cache.py keys the profile by
    this frame's plan)."""
    return df.select(F.col(quote_identifier(key)).alias("t"))


def profile_rows(frame: DataFrame) -> list[PartitionProfile]:
    """The planning job over ``profile_input``'s frame: per non-empty input partition,
    its profile (only the ORDER BY column reaches Python)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    rows = frame.mapInArrow(_Profile(), from_arrow_schema(_PROFILE_SCHEMA)).toArrow()
    return [PartitionProfile(r["pid"], r["n"], r["nulls"], r["lo"] or 0, r["hi"] or 0,
                             bool(r["strict"])) for r in rows.to_pylist()]


def key_ints(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A timestamp, date or integer Arrow column as int64 (its own unit), nulls dropped."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        column = column.drop_null()
    if pa.types.is_date32(column.type):
        column = column.view(pa.int32())
    return np.asarray(column.cast(pa.int64()))


class _Profile:
    """mapInArrow function of the planning job (picklable): one row per partition."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext
        pid = TaskContext.get().partitionId()
        n = nulls = seen = 0
        lo = hi = previous = None
        strict = True
        for batch in batches:
            column = batch.column(0)
            nulls += column.null_count
            t = key_ints(column)
            if len(t):
                strict = strict and bool(np.all(t[1:] > t[:-1])) and \
                    (previous is None or int(t[0]) > previous)
                previous = int(t[-1])
                lo = int(t.min()) if lo is None else min(lo, int(t.min()))
                hi = int(t.max()) if hi is None else max(hi, int(t.max()))
                n += len(t)
            seen += batch.num_rows
        if not seen:
            return
        yield pa.RecordBatch.from_pylist(
            [{"pid": pid, "n": n, "nulls": nulls, "lo": lo, "hi": hi, "strict": strict}],
            schema=_PROFILE_SCHEMA)


def numbered(df: DataFrame, relevant_sql: str, counts: dict[int, int], extra: list,
             marker: str) -> DataFrame:
    """df's rows some variable may take, with their partition id and file index in
    POSITION_COLUMN (numbered below the filter, which Spark does not push through) and
    the ``extra`` columns, plus each partition's first row and its rows from index ``counts[pid] - 1`` on (all rows
    of a partition not in ``counts``), flagged true in ``marker`` when no variable takes
    them: the tasks check their partition's row count and range on them (``ends_match``)
    and drop them."""
    numbered = df.select("*", F.monotonically_increasing_id().alias(POSITION_COLUMN),
                         F.coalesce(F.expr(relevant_sql), F.lit(False)).alias(_RELEVANT))
    mid = F.col(POSITION_COLUMN)
    index, pid = mid.bitwiseAND(F.lit(_INDEX_MASK)), F.shiftright(mid, _INDEX_BITS)
    lasts = F.create_map(*[F.lit(v) for p, n in sorted(counts.items())
                           for v in (int(p), int(n) - 1)]) if counts else None
    last = F.lit(0).cast("long") if lasts is None else \
        F.coalesce(F.try_element_at(lasts, pid.cast("int")).cast("long"), F.lit(0).cast("long"))
    ends = (index == F.lit(0)) | (index >= last)
    return numbered.where(F.col(_RELEVANT) | ends) \
        .select("*", *extra, (~F.col(_RELEVANT)).alias(marker)).drop(_RELEVANT)


def ends_match(first: int, last: int, t_first: int, t_last: int, count: int, lo: int,
               hi: int) -> bool:
    """Whether a task's rows (first/last file index and time, all rows seen, checks
    included) span its profiled partition: index 0 at time lo to count - 1 at time hi."""
    return (first, last, t_first, t_last) == (0, count - 1, lo, hi)


def overlap_positions(rows: pa.Table, pid_column: str, times: np.ndarray, layout,
                      overlaps, offsets: dict[int, int]) -> np.ndarray:
    """Global positions of the overlap rows (all rows of their time ranges, relevant or
    not, each with its partition id): partition k's rows read by an earlier partition are
    its first ones (times <= the latest ``after_to`` before k), those read by a later one
    its last ones; times strictly increase in every partition (the profile said so)."""
    pids = np.asarray(rows.column(pid_column), dtype=np.int64)
    out = np.full(len(pids), -1, np.int64)
    for k, r in enumerate(layout):
        at = np.flatnonzero(pids == r.pid)
        if not len(at):
            continue
        order = at[np.argsort(times[at], kind="stable")]
        prefix_to = max((o.after_to for o in overlaps[:k] if o.after_to is not None),
                        default=None)
        p = 0 if prefix_to is None else int(np.sum(times[order] <= prefix_to))
        rank = np.arange(len(order), dtype=np.int64)
        index = np.where(rank < p, rank, r.count - len(order) + rank)
        out[order] = offsets[r.pid] + index
    return out


def with_breaks(batch: pa.RecordBatch, positions: np.ndarray, previous: int | None,
                position_at: int, break_at: int) -> pa.RecordBatch:
    """batch with its global positions and break flags (a row breaks unless it directly
    follows the previous kept row, ``previous`` for the first one)."""
    flags = np.empty(len(positions), bool)
    if len(positions):
        flags[0] = previous is None or positions[0] != previous + 1
        flags[1:] = positions[1:] != positions[:-1] + 1
    schema = batch.schema
    batch = batch.set_column(position_at, schema.field(position_at), pa.array(positions))
    return batch.set_column(break_at, schema.field(break_at), pa.array(flags))


def own_positions(mids: np.ndarray, pid: int, offset: int) -> np.ndarray | None:
    """Global positions of a task's own kept rows from their monotonically_increasing_id
    values, or None when one was read from another partition."""
    if len(mids) and np.any((mids >> _INDEX_BITS) != pid):
        return None
    return offset + (mids & _INDEX_MASK)


def worker_reads(bound) -> set[str] | None:
    """The prepared columns a bound CEP or SQL:2016 worker reads (conditions, partition,
    window and break columns, measure leaves, aggregate arguments), or None when it may
    read any:
    ALL ROWS passes every column through, a worker planning from its own first rows
    evaluates the raw clause. With gap pushdown no task sorts (every partition is in
    order), so the other columns need not cross to Python at all."""
    config = getattr(bound.worker, "config", None)
    if not isinstance(config, (CepConfig, WorkerConfig)) or config.all_rows \
            or getattr(config, "with_unmatched", False) \
            or getattr(config, "worker_planner", None) is not None:
        return None
    names = set(config.code.columns) | set(config.partition_columns) | set(config.passthrough)
    names |= {config.window_column, getattr(config, "breaks_column", None)}
    names |= set(config.leaf_columns) | {c for _, c in config.aggregate_columns}
    for spec in config.gathered:
        for _, args in spec.parts:
            for arg in args:
                names |= {e.column for e in walk(arg) if isinstance(e, ColumnRef)}
    names.discard(None)
    return names
