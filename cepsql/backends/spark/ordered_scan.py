"""Ordered-scan slicing: each input partition of a time-ordered source is one slice, no shuffle.

Event logs are mostly written in time order, so the input partitions of their scan often
hold disjoint, increasing ranges of the ORDER BY time. Then partition i, followed by the
rows within the window after its last time (from the next partitions) and, with NOT(...)
in the pattern, preceded by the rows within the window before its first time, is a
contiguous stretch of the whole ordered input: the grid slice's core + overlap
(slicing.py), with the input partition as core. So:

1. per input partition, its row count and first/last time (``partition_ranges``): from
   the Parquet footers' row-group statistics when the source is a plain Parquet scan
   (parquet_profile.py, no job), else one cheap job (an aggregate in the JVM reading only
   the ORDER BY column);
2. when the non-empty partitions' ranges are strictly increasing (no shared time at a
   border, where the tie-breaking columns would interleave two partitions), a second job
   collects the overlap rows (a filter on the time ranges, which Parquet applies to its
   row-group statistics) to the driver; with gap pushdown over local Parquet files the
   driver reads them itself instead (parquet_rows.py, no job);
3. ONE mapInArrow over the source: a task holds its partition's Arrow batches (as
   Spark's sort would hold them in the JVM), sorts them only when they are not strictly
   increasing in time, puts the overlap rows of the neighbouring partitions around them
   (flagged as copies) and runs the plan's worker; matches are kept by the slice holding
   their first row (``SlicedClause.finish``), as for grid slices.

Under STRICT_CONTIGUITY the rows no variable can take need not reach Python at all
(gap_scan.py: dropped in the JVM, their gaps passed on as break flags) when every
partition is in time order in its files; the first job is then gap_scan's profile
(again from the Parquet footers where they answer: parquet_profile.py).

Column pruning (``prune``): without gap pushdown a task needs every sortable column only
to break ORDER BY ties when it sorts its partition. With pruning the first job is
gap_scan's profile job (the key only to Python); when every partition's times strictly
increase in file order (no ties, no sort), only the columns the worker reads
(gap_scan.worker_reads) and the key cross to Python (not the strings DEFINEs read only
through their prepared booleans); a task that meets a tie then fails as for a changed
partition. (An exact count(DISTINCT key) per partition in the JVM aggregate was tried:
its shuffle cost 4-5 s at 5M rows against 1 s for the plain aggregate and 2.7 s for the
profile job.)

The tasks check their partition against the first job's count and range and fail
(CepRuntimeError) rather than answer from a partitioning that changed between the jobs.
The profile and the overlap rows are kept per session and file set (profile_cache.py):
a later query over unchanged files runs neither job.
SQL:2016 SKIP PAST LAST ROW (``chain``, chain_slicing.py): the overlap is counted in
rows (a time stretch estimated from the partitions' densities, checked and widened on
the driver), the driver runs the speculative chains over the rows around each border
and tells each task where to start its search; if they do not converge, the clause runs
as one task (run_plan over the scan's frame, whose slice column is one value; with gap
pushdown over every row of the source). With gap pushdown (chain_gap_filter) the chain
path ships only the kept rows and the columns the worker reads, each run of kept rows a
group of its own, and keeps the overlap rows in the memo as above.
Preconditions (else slicing.py's grid): a first ORDER BY key that is a plain ascending
column of an integer, DATE or TIMESTAMP(_NTZ) type, a source plan without an Exchange
(its partitions are the scan's), overlap rows at most OVERLAP_SHARE of the input.
"""
from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from cepsql.errors import CepRuntimeError
from cepsql.algebra.expressions import ColumnRef
from cepsql.compile.cep import BREAK_COLUMN
from cepsql.compile.query_plan import QueryPlan
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.backends.spark.columns import column
from cepsql.backends.spark.chain_slicing import (ChainRows, entered, gap_slice_entry,
                                                 region_matches, run_breaks, slice_entry)
from cepsql.backends.spark.execute import final_frame, map_in_arrow, prepared_input, run_plan
from cepsql.backends.spark.gap_scan import (POSITION_COLUMN, ends_match, key_ints, numbered,
                                            overlap_positions, own_positions,
                                            profile_input, with_breaks, worker_reads)
from cepsql.backends.spark.parquet_profile import footer_profiles
from cepsql.backends.spark.parquet_rows import driver_rows
from cepsql.backends.spark.profile_cache import cached_profiles, memoized
from cepsql.runtime.workers import bind_worker
from cepsql.backends.spark.slice_columns import COPY_COLUMN, SLICE_COLUMN

__all__ = ["PartitionRange", "OrderedScan", "ordered_layout", "ordered_scan",
           "partition_ranges", "sort_indices"]

OVERLAP_SHARE = 0.25   # more overlap rows than this share of the input: grid slices
CHAIN_TRIES = 3        # (chain slicing) overlap widenings before running as one task
CHAIN_WIDEN = 8        # each widening reads this many times the rows around a border
_PID = "__cep_scan_pid"
_KEEP = "__cep_scan_keep"
_INTEGERS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


@dataclass(frozen=True)
class PartitionRange:
    """One input partition's ORDER BY times (as integers of the key's unit)."""
    pid: int
    count: int
    lo: int
    hi: int
    distinct: int | None = None  # distinct times (None: not known)


def partition_ranges(df: DataFrame, key: str) -> list[PartitionRange]:
    """Per non-empty input partition of df, its rows with a time and their range: from
    the Parquet footers when df is a plain Parquet scan (parquet_profile.py, no job),
    else the first job (only the ``key`` column is read; an aggregate in the JVM, no
    Python worker)."""
    found = footer_profiles(profile_input(df, key), strict=False)
    if found is not None:
        return [PartitionRange(p.pid, p.count, p.lo, p.hi) for p in found if p.count]
    pid = F.spark_partition_id().alias(_PID)
    table = (df.select(pid, column(key).alias("t")).where(F.col("t").isNotNull())
             .groupBy(_PID).agg(F.count("t").alias("n"), F.min("t").alias("lo"),
                                F.max("t").alias("hi")).toArrow())
    los, his = key_ints(table.column("lo")), key_ints(table.column("hi"))
    return [PartitionRange(int(p), int(n), int(lo), int(hi))
            for p, n, lo, hi in zip(table.column(_PID).to_pylist(),
                                    table.column("n").to_pylist(), los, his)]


def ordered_layout(ranges: list[PartitionRange]) -> list[PartitionRange] | None:
    """The non-empty partitions in time order when their ranges are strictly increasing
    (each partition's first time after the previous one's last), else None."""
    used = sorted((r for r in ranges if r.count), key=lambda r: (r.lo, r.hi, r.pid))
    if any(b.lo <= a.hi for a, b in zip(used, used[1:])):
        return None
    return used


def _key_unit(dtype: T.DataType) -> float | None:
    """Microseconds per unit of the key's integer form (as cep_worker window_micros)."""
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return 1.0
    if isinstance(dtype, T.DateType):
        return 86_400_000_000.0
    if isinstance(dtype, _INTEGERS):
        return 1_000_000.0
    return None


def _literal(dtype: T.DataType, value: int) -> Column:
    """A Spark literal of the key's type from its integer form (no session zone)."""
    if isinstance(dtype, T.TimestampType):
        return F.expr(f"timestamp_micros({value}L)")
    if isinstance(dtype, T.TimestampNTZType):
        wall = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=value)
        return F.expr(f"TIMESTAMP_NTZ'{wall.isoformat(sep=' ')}'")
    if isinstance(dtype, T.DateType):
        return F.expr(f"date_from_unix_date({value})")
    return F.lit(value)  # (no cast: the window may reach past a narrow type's range)


def _prunes_partitions(df: DataFrame) -> bool:
    """Whether a file scan in df's plan skips files by directory partition values."""
    import re
    try:
        plan = df._jdf.queryExecution().executedPlan().toString()
    except Exception:  # noqa: BLE001
        return True
    return re.search(r"PartitionFilters: \[[^\]]", plan) is not None


def _has_exchange(df: DataFrame) -> bool:
    try:
        return "Exchange" in df._jdf.queryExecution().executedPlan().toString()
    except Exception:  # noqa: BLE001  (Spark Connect: no JVM plan to look at)
        return True


@dataclass(frozen=True)
class _Overlap:
    """Partition ``rank`` reads the rows of earlier partitions at times >= before_from
    and of later ones at times <= after_to (None: none)."""
    before_from: int | None
    after_to: int | None


def ordered_scan(df: DataFrame, plan: QueryPlan, after: float, before: float,
                 share: float | None = None, gaps: str | None = None,
                 prune: bool = False, chain: ChainRows | None = None) -> "OrderedScan | None":
    """The scan slicing of ``df`` (relevant rows, no slicing columns yet) for the planned
    unpartitioned clause ``plan``, or None when a precondition fails (then grid slices).
    after/before: the overlap in microseconds; share: default OVERLAP_SHARE. gaps: the
    clause's gap_filter as Spark SQL (gap_scan.py): when every input partition is in
    order, only the rows it keeps reach Python, the others become break flags. prune:
    without gap pushdown, profile the partitions so that, when each is strictly in time
    order, only the columns the worker reads are sent. chain: a SQL:2016 SKIP PAST LAST
    ROW clause (chain_slicing.py): the overlap is counted in rows (after/before unused),
    each slice's search entry found on the driver."""
    key = plan.spec.order_by[0]
    if not key.ascending or not isinstance(key.expr, ColumnRef) or key.expr.var:
        return None
    sort = plan.sort_keys
    if not sort or sort[0].column.lower() != key.expr.column.lower() or \
            any(not k.ascending or not k.nulls_first for k in sort[1:]):
        return None  # (tie-breakers: ascending, NULLs first, as the in-task sort orders)
    name = key.expr.column
    fields = {f.name.lower(): f for f in df.schema.fields}
    field = fields.get(name.lower())
    unit = None if field is None else _key_unit(field.dataType)
    if unit is None or _has_exchange(df):
        return None
    profiles, origin = {}, None
    if gaps is not None and POSITION_COLUMN not in df.columns:
        found, origin = cached_profiles(df, field.name)
        profiles = {p.pid: p for p in found}
        ranges = [PartitionRange(p.pid, p.count, p.lo, p.hi) for p in profiles.values()]
        if not all(p.in_order for p in profiles.values()):
            gaps, profiles = None, {}  # NULL or unordered times: every row to Python
    elif prune:  # times strictly increasing in file order: no ties, no in-task sort
        found, origin = cached_profiles(df, field.name)
        gaps = None
        ranges = [PartitionRange(p.pid, p.count, p.lo, p.hi, p.count if p.strict else None)
                  for p in found]
    else:
        gaps, ranges = None, partition_ranges(df, field.name)
    layout = ordered_layout(ranges)
    if layout is None:
        return None
    if chain is not None:  # times that hold about the rows wanted around each border
        # (after a border: a margin over the rows needed, as dropped rows (gap pushdown)
        # or a lull would thin them out and widen with a second overlap job)
        after_rows = max(chain.after_rows, chain.before_rows // 4)
        a, b = (_rows_time(layout, n) for n in (after_rows, chain.before_rows))
    else:
        a, b = math.ceil(after / unit), math.ceil(before / unit)
    overlaps = _overlaps(layout, a, b)
    total = sum(r.count for r in layout)
    share = OVERLAP_SHARE if share is None else share
    if _overlap_estimate(layout, overlaps) > share * max(total, 1):
        return None
    untied = gaps is None and prune and all(r.distinct == r.count for r in layout)
    return OrderedScan(field.name, field.dataType, layout, overlaps, total, gaps, profiles,
                       untied=untied, profile_origin=origin, chain=chain, reach=(a, b))


def _overlaps(layout: list[PartitionRange], a: int, b: int) -> list["_Overlap"]:
    """Each partition reads a (key units) after its last time and b before its first."""
    return [_Overlap(r.lo - b if b and i else None,
                     r.hi + a if a and i + 1 < len(layout) else None)
            for i, r in enumerate(layout)]


def _rows_time(layout: list[PartitionRange], rows: int) -> int:
    """A stretch of time (key units) holding about ``rows`` rows at twice the mean row
    spacing of the sparsest partition; the driver checks the rows it got (bursts and
    lulls vary) and widens when a border has too few."""
    if rows <= 0:
        return 0
    spacing = max((r.hi - r.lo) / max(r.count - 1, 1) for r in layout)
    return int(math.ceil(2 * rows * max(spacing, 1.0)))


def _overlap_estimate(layout: list[PartitionRange], overlaps: list[_Overlap]) -> float:
    """Overlap rows, assuming rows spread evenly over each partition's range."""
    def rows_in(lo: float, hi: float) -> float:
        n = 0.0
        for r in layout:
            width = max(r.hi - r.lo, 1)
            n += r.count * max(0.0, min(hi, r.hi) - max(lo, r.lo) + 1) / width
        return n
    return sum((rows_in(o.before_from, layout[i].lo - 1) if o.before_from is not None else 0)
               + (rows_in(layout[i].hi + 1, o.after_to) if o.after_to is not None else 0)
               for i, o in enumerate(overlaps))


_ORIGINS = {
    "cache": "; partition profiles from the session's cache (same files, plan and conf as "
             "an earlier query: no profile job)",
    "job": "; partition profiles from a profile job (kept in the session's cache for "
           "later queries over the same files)",
    "uncached": "; partition profiles from a profile job (not cached: no exact identity "
                "for this source, or cepsql.slicing.profileCache=false)",
    "footer": "; partition profiles from the Parquet footers' row-group statistics (no "
              "profile job; kept in the session's cache for later queries over the same "
              "files)",
    "footer uncached": "; partition profiles from the Parquet footers' row-group "
                       "statistics (no profile job)",
}


@dataclass
class OrderedScan:
    """The driver side of one scan-sliced clause: what the first job found."""
    key: str
    dtype: T.DataType
    layout: list[PartitionRange]
    overlaps: list[_Overlap]
    rows: int
    gaps: str | None = None  # the gap filter (Spark SQL) when it is pushed down
    profiles: dict = field(default_factory=dict)  # pid -> gap_scan.PartitionProfile
    source: DataFrame | None = None  # (gaps) the unfiltered frame, for the overlap job
    untied: bool = False  # (no gaps) no partition has tied times: columns may be pruned
    # where the partition profiles came from (profile_cache.cached_profiles): "cache",
    # "job", "uncached"; None: no profile job (the JVM range aggregate)
    profile_origin: str | None = None
    chain: ChainRows | None = None  # SQL:2016 SKIP PAST LAST ROW: entries per slice
    reach: tuple[int, int] = (0, 0)  # the overlap after / before (key units)
    entries: dict | None = None  # (chain) after run: pid -> entry offset; None: one task

    def describe(self) -> str:
        return self._describe() + _ORIGINS.get(self.profile_origin, "")

    def _describe(self) -> str:
        head = f"an ordered scan: each of the {len(self.layout)} input partitions (disjoint, "
        if self.chain is not None:
            return head + (
                "increasing ORDER BY ranges) is a slice, no shuffle, also reading about "
                f"{self.chain.before_rows} rows before and {self.chain.after_rows} after "
                "itself; SKIP PAST LAST ROW chains across slices: the driver runs the "
                f"search from each of the {self.chain.span} places the chain can stand "
                "at before a slice's first row over those rows, and when they converge "
                "the slice's task searches from where they enter it (else wider rows, "
                "and after that one task)" + ("" if self.gaps is None else
                f"; gap pushdown: rows satisfying no variable ({self.gaps} is not true) "
                "are dropped before the transfer to Python, each run of rows between "
                "them searched on its own; only the columns the evaluator reads are "
                "sent"))
        if self.gaps is None and self.untied:
            return head + ("increasing ORDER BY ranges, each strictly in time order in its "
                           "files) is a slice, no shuffle; column pruning: with ONE ROW PER "
                           "MATCH only the columns the evaluator reads are sent to Python")
        if self.gaps is None:
            return head + ("increasing ORDER BY ranges; a task sorts its rows only when they "
                           "are not in order) is a slice, no shuffle")
        return head + ("increasing ORDER BY ranges, each in time order in its files) is a "
                       f"slice, no shuffle; gap pushdown: rows satisfying no variable "
                       f"({self.gaps} is not true) are dropped before the transfer to "
                       "Python, the gaps they leave kept as breaks; with ONE ROW PER MATCH "
                       "only the columns the evaluator reads are sent")

    def frame(self, df: DataFrame, extra: list[Column]) -> DataFrame:
        """The rows the tasks read (with the ``extra`` columns): those with a time, or
        with gap pushdown the kept ones, numbered, plus a break flag for the tasks."""
        if self.gaps is None:
            return df.where(column(self.key).isNotNull()).select("*", *extra)
        flag = F.lit(False).alias(BREAK_COLUMN)
        self.source = df.select("*", F.lit(0).cast("long").alias(POSITION_COLUMN), *extra,
                                flag)
        counts = {r.pid: r.count for r in self.layout}
        return numbered(df, self.gaps, counts, extra, BREAK_COLUMN)  # (the check rows flagged)

    def offsets(self) -> dict[int, int]:
        """Per partition id: the global position of its first row."""
        out, at = {}, 0
        for r in self.layout:
            out[r.pid] = at
            at += r.count
        return out

    def run(self, frame: DataFrame, plan: QueryPlan) -> DataFrame:
        """The sliced plan's worker output over ``frame`` (the source plus the slice
        columns), one task per input partition; the overlap rows are collected first."""
        prepared = prepared_input(frame, plan, relevance=False)  # the frame has it
        bound = bind_worker(plan, arrow_schema(prepared))
        schema = arrow_schema(prepared)
        keys = [(k.column, "ascending", "at_start") for k in plan.sort_keys
                if k.column not in plan.partition_columns]
        expected = {r.pid: (r.count, r.lo, r.hi) for r in self.layout}
        untied = False
        if self.gaps is None and self.untied:
            reads = worker_reads(bound)
            needed = {self.key, COPY_COLUMN, SLICE_COLUMN} | (reads or set())
            if reads is not None and needed <= set(prepared.columns) \
                    and self.key == keys[0][0]:
                prepared = prepared.select(*[column(c) for c in prepared.columns if c in needed])
                bound = bind_worker(plan, arrow_schema(prepared))
                schema = arrow_schema(prepared)
                keys, untied = keys[:1], True
        if self.gaps is not None:
            reads = worker_reads(bound)
            needed = {self.key, POSITION_COLUMN, COPY_COLUMN, SLICE_COLUMN, BREAK_COLUMN} | \
                (reads or set())
            if reads is not None and needed <= set(prepared.columns):
                prepared = prepared.select(*[column(c) for c in prepared.columns if c in needed])
                bound = bind_worker(plan, arrow_schema(prepared))
                schema = arrow_schema(prepared)
            keys = [(POSITION_COLUMN, "ascending", "at_start")]
        entries = None
        if self.chain is not None:
            found = self._chain_entries(prepared, plan, bound, schema, keys)
            if found is None:  # the chains did not converge: the whole input as one slice
                return run_plan(frame if self.gaps is None else self.source, plan)
            entries, rows = found
            self.entries = entries
        else:
            rows = self._rows(prepared, plan, schema)
        if self.gaps is not None:
            offsets, lent = self.offsets(), _lent_rows(self.layout, self.overlaps, rows, schema)
            expected = {p: (c, lo, hi, lent[p], offsets[p])
                        for p, (c, lo, hi) in expected.items()}
        neighbours = _neighbours(self.layout, self.overlaps, rows, schema, self.key, keys)
        task = _ScanTask(bound.worker, schema, self.key, keys, COPY_COLUMN, expected,
                         neighbours, self.gaps is not None, untied, entries)
        out = map_in_arrow(prepared, task, from_arrow_schema(bound.worker_schema))
        return final_frame(out, bound)

    def _rows(self, prepared: DataFrame, plan: QueryPlan, schema: pa.Schema) -> pa.Table:
        """The overlap rows (second job, or its memo): with gap pushdown only the kept
        ones, with their global positions, in ``schema``'s columns."""
        if self.gaps is None:
            return self._overlap_rows(prepared)
        rows = self._positioned(self._overlap_rows(
            prepared_input(self.source, plan, relevance=False), F.expr(self.gaps)))
        return rows.select(schema.names + [_PID])

    def _chain_entries(self, prepared: DataFrame, plan: QueryPlan, bound, schema: pa.Schema,
                       keys: list):
        """(SQL:2016 chain slicing) (entry offset per partition id after the first, the
        overlap rows) or None: some border's chains do not converge even over
        CHAIN_WIDEN ** (CHAIN_TRIES - 1) times the rows. An offset is the slice's entry
        minus its first row (chain_slicing.slice_entry)."""
        a, b = self.reach
        offsets = None if self.gaps is None else self.offsets()
        for _ in range(CHAIN_TRIES):
            rows = self._rows(prepared, plan, schema)
            neighbours = _neighbours(self.layout, self.overlaps, rows, schema, self.key, keys)
            entries = chain_entries(self.layout, self.overlaps, neighbours, schema,
                                    self.chain, bound, offsets)
            if entries is not None:
                return entries, rows
            a, b = a * CHAIN_WIDEN + 1, b * CHAIN_WIDEN + 1
            self.overlaps = _overlaps(self.layout, a, b)
        return None

    def _overlap_rows(self, prepared: DataFrame, flag: Column | None = None) -> pa.Table:
        """The second job: the rows some partition reads besides its own, with their
        partition id (a filter on time ranges only, which file scans can push down) and,
        with ``flag``, whether the gap filter keeps them (_KEEP)."""
        key = column(self.key)
        ranges, spans = [], []  # (spans: the same time ranges as inclusive integer pairs)
        for r, o in zip(self.layout, self.overlaps):
            if o.before_from is not None:
                ranges.append((key >= _literal(self.dtype, o.before_from))
                              & (key < _literal(self.dtype, r.lo)))
                spans.append((o.before_from, r.lo - 1))
            if o.after_to is not None:
                ranges.append((key > _literal(self.dtype, r.hi))
                              & (key <= _literal(self.dtype, o.after_to)))
                spans.append((r.hi + 1, o.after_to))
        if not ranges:
            empty = pa.Table.from_batches([], arrow_schema(prepared)).append_column(
                _PID, pa.array([], pa.int32()))
            return empty if flag is None else empty.append_column(_KEEP, pa.array([], pa.bool_()))
        condition = ranges[0]
        for c in ranges[1:]:
            condition = condition | c
        pid = [F.spark_partition_id().alias(_PID)]
        if flag is not None:
            pid.append(F.coalesce(flag, F.lit(False)).alias(_KEEP))

        def collect() -> pa.Table:
            if flag is not None:  # (the tasks check the rows they lend: parquet_rows.py)
                found = driver_rows(prepared.select("*", *pid[1:]), self.key, spans, _PID)
                if found is not None:
                    return found
            picked = prepared.where(condition).select("*", *pid)
            if _prunes_partitions(picked):  # dropped files would renumber the partitions
                picked = prepared.select("*", *pid).where(condition)
            return picked.toArrow()
        if flag is None:  # (no task compares them with its own rows: no memo)
            rows = collect()
        else:  # the frame's rows and flags over these files, each with its input
            # partition: memoized per file set like the profile (checked by _lent_rows)
            basis = prepared.where(condition).select("*", *pid[1:])
            rows, _ = memoized(basis, ("overlap",), collect, lambda table: table.nbytes)
        self._check_owners(rows)
        return rows

    def _positioned(self, rows: pa.Table) -> pa.Table:
        """(gaps) The overlap rows the gap filter keeps, with their global positions."""
        if not rows.num_rows:
            return rows.drop_columns([_KEEP])
        at = rows.schema.get_field_index(POSITION_COLUMN)
        positions = overlap_positions(rows, _PID, key_ints(rows.column(self.key)),
                                      self.layout, self.overlaps, self.offsets())
        rows = rows.set_column(at, rows.schema.field(at), pa.array(positions))
        keep = rows.column(_KEEP)
        return rows.filter(keep).drop_columns([_KEEP])

    def _check_owners(self, rows: pa.Table) -> None:
        """Each overlap row lies in the range of the partition it was read from."""
        if not rows.num_rows:
            return
        bounds = {r.pid: (r.lo, r.hi) for r in self.layout}
        t = key_ints(rows.column(self.key))
        for p, v in zip(rows.column(_PID).to_pylist(), t):
            lo, hi = bounds.get(p, (1, 0))
            if not lo <= v <= hi:
                raise _changed()


def _neighbours(layout, overlaps, rows: pa.Table, schema: pa.Schema, key: str,
                keys: list) -> dict[int, tuple[bytes | None, bytes | None]]:
    """Per partition id: the rows it reads before and after its own (Arrow IPC bytes,
    in the global order: partitions in time order, each sorted as its own task sorts)."""
    rank = {r.pid: i for i, r in enumerate(layout)}
    pids = np.asarray(rows.column(_PID)) if rows.num_rows else np.zeros(0, np.int32)
    ranks = np.array([rank.get(int(p), -1) for p in pids], np.int64)
    t = key_ints(rows.column(key)) if rows.num_rows else np.zeros(0, np.int64)
    body = rows.drop_columns([_PID]).cast(schema) if rows.num_rows else schema.empty_table()
    if rows.num_rows:  # global order: by rank, then as a task sorts its rows
        ordered = pa.Table.from_arrays([pa.array(ranks)], ["__rank"])
        for name, *_ in keys:
            ordered = ordered.append_column(name, _sort_key(body.column(name)))
        order = pc.sort_indices(ordered, sort_keys=[("__rank", "ascending", "at_start")]
                                + keys).to_numpy()
        body, ranks, t = body.take(order), ranks[order], t[order]
    out = {}
    for i, (r, o) in enumerate(zip(layout, overlaps)):
        before = after = None
        if o.before_from is not None:
            before = _ipc(body.filter(pa.array((ranks < i) & (t >= o.before_from))))
        if o.after_to is not None:
            after = _ipc(body.filter(pa.array((ranks > i) & (t <= o.after_to))))
        out[r.pid] = (before, after)
    return out


def _lent_rows(layout, overlaps, rows: pa.Table, schema: pa.Schema) -> dict[int, tuple]:
    """(gaps) Per partition id: the time ranges of its rows the other partitions read
    (t <= prefix, t >= suffix; None: none) and those of the kept overlap rows ``rows``
    (Arrow IPC bytes in position order), which its task compares with its own rows (the
    overlap rows may come from profile_cache's memo)."""
    out = {}
    pids = np.asarray(rows.column(_PID)) if rows.num_rows else np.zeros(0, np.int32)
    body = rows.drop_columns([_PID]).cast(schema) if rows.num_rows else schema.empty_table()
    for k, r in enumerate(layout):
        prefix = max((o.after_to for o in overlaps[:k] if o.after_to is not None),
                     default=None)
        suffix = min((o.before_from for o in overlaps[k + 1:] if o.before_from is not None),
                     default=None)
        mine = body.filter(pa.array(pids == r.pid))
        mine = mine.take(pc.sort_indices(mine, [(POSITION_COLUMN, "ascending")]))
        out[r.pid] = (prefix, suffix, _ipc(mine))
    return out


def _in_lent(t: np.ndarray, prefix: int | None, suffix: int | None) -> np.ndarray:
    at = np.zeros(len(t), bool)
    if prefix is not None:
        at |= t <= prefix
    if suffix is not None:
        at |= t >= suffix
    return at


def _same_rows(got: pa.Table, data: bytes | None, skip: int, schema: pa.Schema) -> bool:
    """Whether got holds the rows of ``data`` (IPC bytes, None: none), column ``skip``
    aside; floating values compared as Spark orders them (NaN equals NaN)."""
    want = schema.empty_table() if data is None else pa.ipc.open_stream(data).read_all()
    if got.num_rows != want.num_rows:
        return False
    return all(i == skip or _sort_key(got.column(i)).equals(_sort_key(want.column(i)))
               for i in range(len(schema)))


def _ipc(table: pa.Table) -> bytes | None:
    if not table.num_rows:
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _sort_key(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A column as Arrow sorts it the way Spark does: floating values as integers whose
    order is Spark's (-0.0 = 0.0, NaN above +infinity), other types as they are."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_floating(column.type):
        return column
    valid = np.asarray(column.is_valid())
    x = np.asarray(column.cast(pa.float64()).fill_null(0.0)) + 0.0
    x = np.where(np.isnan(x), np.nan, x)  # one NaN bit pattern
    bits = x.view(np.int64)
    ordered = bits ^ ((bits >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))
    return pa.array(ordered, mask=~valid)


def sort_indices(table: pa.Table, keys: list) -> np.ndarray:
    """Row order of ``table`` by ``keys`` ((column, "ascending", "at_start") triples: the
    planner's keys, ascending with NULLs first), as Spark's sortWithinPartitions orders."""
    view = pa.Table.from_arrays([_sort_key(table.column(n)) for n, *_ in keys],
                                [n for n, *_ in keys])
    return pc.sort_indices(view, sort_keys=keys).to_numpy()


class _ScanTask:
    """mapInArrow function of the query job (picklable): one input partition as a slice."""

    def __init__(self, worker, schema: pa.Schema, key: str, keys: list, copy_column: str,
                 expected: dict, neighbours: dict, gaps: bool = False, untied: bool = False,
                 entries: dict | None = None):
        self.worker, self.schema, self.key, self.keys = worker, schema, key, keys
        self.copy_column, self.expected, self.neighbours = copy_column, expected, neighbours
        self.gaps, self.untied = gaps, untied
        self.entries = entries  # (chain slicing) pid -> entry offset from its first row

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext
        pid = TaskContext.get().partitionId()
        expected = self.expected.get(pid)
        if expected is None:  # an empty partition (by the first job): nothing to start
            for batch in batches:
                if batch.num_rows:
                    raise _changed()
            return
        if self.gaps and self.entries is not None:  # (chain) each run its own group
            stream = self._runs(self._gap_slice(batches, pid, expected))
            if pid in self.entries:
                at = self.schema.get_field_index(SLICE_COLUMN)
                yield from entered(self.worker, stream, self._entry(pid), at)
            else:
                yield from self.worker(stream)
        elif self.gaps:
            yield from self.worker(self._gap_slice(batches, pid, expected))
        elif self.entries is not None and pid in self.entries:
            yield from self.worker.resumed(self._slice(batches, pid, expected),
                                           self._entry(pid))
        else:
            yield from self.worker(self._slice(batches, pid, expected))

    def _gap_slice(self, batches, pid: int, expected) -> Iterator[pa.RecordBatch]:
        """(gap pushdown) The neighbours' kept rows before, the partition's kept rows (in
        order: the profile said so; streamed), the neighbours' after, each with its
        global position and break flag. The partition's rows arrive with its first and
        last rows (flagged in the break column when no variable takes them: gap_scan
        ``numbered``), which check it against the profile and are then dropped."""
        count, lo, hi, lent, offset = expected
        prefix, suffix, lent_rows = (None, None, None) if lent is None else lent
        mine = []  # (lent is not None) own kept rows the neighbours got from the overlap job
        before, after = self.neighbours.get(pid, (None, None))
        at = self.schema.get_field_index(POSITION_COLUMN), self.schema.get_field_index(
            BREAK_COLUMN)
        previous = None
        for batch in self._copies(before):
            positions = np.asarray(batch.column(at[0]), dtype=np.int64)
            yield with_breaks(batch, positions, previous, *at)
            previous = int(positions[-1])
        seen, first, last, first_t, last_t = 0, -1, -1, None, None
        for batch in batches:
            if not batch.num_rows:
                continue
            t = key_ints(batch.column(self.key))
            positions = own_positions(np.asarray(batch.column(at[0]), dtype=np.int64), pid,
                                      offset)
            if len(t) != batch.num_rows or positions is None or t[0] < lo or t[-1] > hi \
                    or (last_t is not None and (t[0] <= last_t or positions[0] <= last)) \
                    or not (np.all(t[1:] > t[:-1]) and np.all(positions[1:] > positions[:-1])):
                raise _changed()
            if first < 0:
                first, first_t = int(positions[0]), int(t[0])
            last, last_t = int(positions[-1]), int(t[-1])
            seen += batch.num_rows
            checks = batch.column(at[1]).fill_null(False).to_numpy(zero_copy_only=False)
            if checks.any():
                keep = ~checks
                batch, positions, t = batch.filter(pa.array(keep)), positions[keep], t[keep]
            if batch.num_rows:
                batch = with_breaks(batch, positions, previous, *at)
                if lent is not None and ((prefix is not None and t[0] <= prefix) or
                                         (suffix is not None and t[-1] >= suffix)):
                    mine.append(batch.filter(pa.array(_in_lent(t, prefix, suffix))))
                yield batch
                previous = int(positions[-1])
        if not seen or not ends_match(first - offset, last - offset, first_t, last_t,
                                      count, lo, hi):
            raise _changed()
        if lent is not None and not _same_rows(pa.Table.from_batches(mine, self.schema),
                                               lent_rows, at[1], self.schema):
            raise _changed()  # the neighbours read other rows of this partition
        for batch in self._copies(after):
            positions = np.asarray(batch.column(at[0]), dtype=np.int64)
            yield with_breaks(batch, positions, previous, *at)
            previous = int(positions[-1])

    def _entry(self, pid: int) -> int:
        """(chain slicing) The stream row where the task's search begins: its entry
        offset after the rows it reads before its own."""
        before = self.neighbours.get(pid, (None, None))[0]
        lent = 0 if before is None else pa.ipc.open_stream(before).read_all().num_rows
        return lent + self.entries[pid]

    def _runs(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """(gap pushdown, chain slicing) The gap slice's batches with each run of kept
        rows (a break flag begins one) numbered in the slice column: a group of its own
        for the SQL:2016 worker (chain_slicing.run_breaks)."""
        flag_at, group_at = (self.schema.get_field_index(c) for c in (BREAK_COLUMN,
                                                                      SLICE_COLUMN))
        runs = 0
        for batch in batches:
            flags = np.asarray(batch.column(flag_at), dtype=bool)
            groups = runs + np.cumsum(flags, dtype=np.int64)
            if len(groups):
                runs = int(groups[-1])
            yield batch.set_column(group_at, self.schema.field(group_at), pa.array(groups))

    def _slice(self, batches, pid: int, expected) -> Iterator[pa.RecordBatch]:
        """The neighbours' rows before, the partition's own rows in order, the
        neighbours' rows after. The own rows are held until all are read (whether they
        are in order is known only then); a sort, when needed, is Arrow's."""
        count, lo, hi = expected
        before, after = self.neighbours.get(pid, (None, None))
        held, seen, first, last, strict, previous = [], 0, None, None, True, None
        for batch in batches:
            t = key_ints(batch.column(self.key))
            if len(t) != batch.num_rows:
                raise _changed()  # the frame drops NULL times: a different input
            if not len(t):
                continue
            strict = strict and bool(np.all(t[1:] > t[:-1])) and \
                (previous is None or t[0] > previous)
            previous = int(t[-1])
            low, high = int(t.min()), int(t.max())
            first = low if first is None else min(first, low)
            last = high if last is None else max(last, high)
            seen += len(t)
            held.append(batch)
        if (seen, first, last) != (count, lo, hi):
            raise _changed()
        yield from self._copies(before)
        if strict:
            yield from held
        else:
            table = pa.Table.from_batches(held, self.schema)
            del held
            table = table.take(sort_indices(table, self.keys))
            if self.untied:  # sorted by the key alone: exact only without ties
                t = key_ints(table.column(self.key))
                if not np.all(t[1:] > t[:-1]):
                    raise _changed()
            yield from table.to_batches()
        yield from self._copies(after)

    def _copies(self, data: bytes | None) -> Iterator[pa.RecordBatch]:
        if data is None:
            return
        table = pa.ipc.open_stream(data).read_all()
        at = table.schema.get_field_index(self.copy_column)
        flags = pa.array(np.ones(table.num_rows, bool))
        yield from table.set_column(at, self.schema.field(at), flags).to_batches()


def chain_entries(layout: list[PartitionRange], overlaps: list[_Overlap], neighbours: dict,
                  schema: pa.Schema, chain: ChainRows, bound,
                  offsets: dict[int, int] | None = None) -> dict[int, int] | None:
    """Per partition id after the first: where the SKIP PAST LAST ROW chain enters it,
    as an offset from its first row, found from the rows around its first row (its
    ``before`` rows and the previous partition's ``after`` rows, in global order); None
    when a border has too few rows after it or its speculative chains do not converge.
    offsets (gap pushdown: the rows are the kept ones, with global positions): each
    partition's first global position; each run of kept rows is then a group of its
    own (chain_slicing.gap_slice_entry)."""
    out = {}
    for i in range(1, len(layout)):
        before = _table(neighbours[layout[i].pid][0], schema)
        after = _table(neighbours[layout[i - 1].pid][1], schema)
        to_end = overlaps[i - 1].after_to is None or overlaps[i - 1].after_to >= layout[-1].hi
        if after.num_rows < chain.after_rows and not to_end:
            return None
        region = pa.concat_tables([before, after])
        at = before.num_rows
        from_start = overlaps[i].before_from is not None and \
            overlaps[i].before_from <= layout[0].lo
        if offsets is not None:
            entry = _gap_entry(region, at, i, layout, overlaps, offsets, from_start, chain,
                               bound)
        else:
            def run(start, region=region):
                return region_matches(bound.worker, region, POSITION_COLUMN,
                                      bound.final_projection, start)
            entry = slice_entry(run, at, chain.lookback, chain.span, from_start)
        if entry is None:
            return None
        out[layout[i].pid] = entry - at
    return out


def _gap_entry(region: pa.Table, at: int, i: int, layout, overlaps, offsets: dict,
               from_start: bool, chain: ChainRows, bound) -> int | None:
    """(gap pushdown) The chain's entry at row ``at`` of the kept rows around partition
    i's first row. Whether the region's first row begins a run: yes when the region
    starts at the input's first kept row; when it is partition i's first kept row
    (no kept rows before it in the region), yes unless its global predecessor is the
    previous partition's last row and that lies before the region's time range (then
    unknown: the speculative chains, which need rows before ``at``)."""
    if not region.num_rows:
        return at
    positions = np.asarray(region.column(POSITION_COLUMN), dtype=np.int64)
    since = overlaps[i].before_from
    first = from_start or int(positions[0]) == 0 or (at == 0 and (
        int(positions[0]) != offsets[layout[i].pid]
        or (since is not None and layout[i - 1].hi >= since)))
    breaks = run_breaks(positions, bool(first))
    g = region.schema.get_field_index(SLICE_COLUMN)
    region = region.set_column(g, region.schema.field(g),
                               pa.array(np.cumsum(breaks, dtype=np.int64)))

    def run(start: int, fresh: bool):
        if not fresh:
            return region_matches(bound.worker, region, POSITION_COLUMN,
                                  bound.final_projection, start)
        found = region_matches(bound.worker, region.slice(start), POSITION_COLUMN,
                               bound.final_projection, None)
        return None if found is None else [(s + start, e + start) for s, e in found]
    return gap_slice_entry(run, breaks, at, chain.span)


def _table(data: bytes | None, schema: pa.Schema) -> pa.Table:
    return schema.empty_table() if data is None else pa.ipc.open_stream(data).read_all()


def _changed() -> CepRuntimeError:
    return CepRuntimeError(
        "an input partition changed between the ordered scan's planning job and the query "
        "(set cepsql.slicing.bounds=grid for this source)")
