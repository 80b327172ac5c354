"""Time slicing: run an unpartitioned, time-windowed CEP clause on many Spark tasks.

Without PARTITION BY the whole input is one ordered stream (one task). With WITHIN
INTERVAL w every match, and every row its conditions can read, lies within w of the
match's first row (rule R3; R6 bounds open NOT regions by the window too). So the time
axis is cut into K slices; slice j is evaluated over the rows of its *core*
[t_j, t_j+1) plus the rows within w after it (the match's extent) and, with NOT(...) in
the pattern, within w before it (a leading NOT looks back); a match is output only by the
slice whose core holds its first row. Each match is thus output exactly once, with the
same rows, measures and NOT checks as on the whole stream.

Mechanics (no change to the planner): rows are copied into every slice that may need
them (column SLICE_COLUMN), each copy flagged by whether SLICE_COLUMN is the row's own
core slice (COPY_COLUMN false) or a neighbour's; the clause gets PARTITION BY
SLICE_COLUMN and a hidden measure ``FIRST(COPY_COLUMN)``; ``SlicedClause.finish`` keeps
the matches whose first row is no copy (that slice's core holds it) and drops the helper
columns, which restores the clause's own output layout.

Slice labels are chosen so that Spark's hash partitioning (``repartition(n, col)`` in
run_plan, n = the slice count) puts each slice in its own task.

Slice bounds (``cepsql.slicing.bounds``):

* ``auto`` (default): ``scan`` for a contiguity clause whose rows no variable can take
  may be dropped (analyze/relevance.py gap_filter) over a source read from files (event
  logs are mostly written in time order), else ``grid``. There the scan's gap pushdown
  (gap_scan.py) ships only the kept rows and the columns the worker reads to Python:
  1.6x grid at 5M rows under load (bench_unpartitioned.py). Without it the scan's small
  jobs cost about what the shuffle saves (the Arrow transfer dominates both), so other
  clauses keep the grid.
* ``scan``: each input partition of the source is a slice when their ORDER BY ranges
  are disjoint and increasing (ordered_scan.py: a JVM min/max/count job reading only the
  ORDER BY column -- with gap pushdown a Python job reading only it --, a job collecting
  the overlap rows, then one mapInArrow over the source, no shuffle; the two planning
  jobs' results kept per file set for later queries, profile_cache.py); else ``grid``.
* ``grid``: a fixed grid of slices ``grid_windows`` windows wide (default 16,
  ``cepsql.slicing.gridWindows``), aligned at time 0; the slice id is
  ``floor(t / width)`` (for a TIMESTAMP_NTZ key: the start of the tumbling ``window()``
  holding t, see _window_cut) and Spark's hash partitioning spreads the many slices over
  the tasks (a task evaluates its slices one after another, as partitions). No job runs
  before the query, and the copies add at most (after + before) / width of the input
  (a strict ``A B C``: one window in sixteen, 6.25 %, against 12.5 % with the former
  default of 8). Data spanning fewer than ``grid_windows`` windows get one slice.
  Below 1, each row is copied into about 1 / grid_windows slices (measured: 0.01 made a
  1M-row query 30x slower); such thin grids serve the tests.
* ``span``: K = min(max_slices (default spark.sql.shuffle.partitions), span /
  (min_slice_windows * w)) equal slices of the data's span, found by a min/max job before
  the query; slices at least ``min_slice_windows`` windows wide (default 4: at most 50 %
  more rows); labels give each slice a task of its own.

Cost beyond the partitioned path's shuffle + sort (issue 13 point 6, profiled on 1M-5M
ticks with a TIMESTAMP_NTZ ts): the ORDER BY time's micros (for TIMESTAMP_NTZ the exact
zone-free form, an interval cast to DECIMAL, cost ~0.5 us a row, more than the scan;
window() labels cost nearly nothing), Spark's Generate for the copies (a posexplode of a
one- or two-element array) and the copied rows, which pass the shuffle, sort, Arrow and
the evaluator like the others (16 windows a slice: 6.25 % more rows for ``a b c``).

SQL:2016 mode (``chain_slicing.chain_blocker``): an unpartitioned ONE ROW PER MATCH
clause with AFTER MATCH SKIP PAST LAST ROW over a bounded pattern (no anchors, no empty
match, no MATCH_NUMBER(), no WITHIN) is sliced by the ordered scan alone (a grid cannot
count rows): each input partition is a slice that also reads some rows before and after
itself, and its search starts where the chain of matches enters it, found on the driver
(chain_slicing.py); when the chains around a border do not converge, one task.

Conditions in CEP mode (``slicing_blocker``): WITHIN INTERVAL, a plan without partition
columns (written or inferred, see analyze/partition_inference.py), no PREV/NEXT (they count rows, not time),
no MATCH_NUMBER() in MEASURES, no explicit AFTER MATCH SKIP PAST LAST ROW (its selection
chains across slices), no WITH UNMATCHED ROWS (rows with a NULL time are dropped: they
never fit a window, and nothing else makes them visible), first ORDER BY key of a
timestamp, date or numeric type.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cepsql.algebra.expressions import ColumnRef, Navigation, walk
from cepsql.algebra.pattern import contains_negation
from cepsql.algebra.spec import MatchRecognizeSpec, Measure, PartitionKey
from cepsql.errors import CepError
from cepsql.exprs.spark_sql import to_spark_sql
from cepsql.analyze.partition_inference import whole_input_output
from cepsql.analyze.relevance import chain_gap_filter, gap_filter
from cepsql.compile.cep import BREAK_COLUMN
from cepsql.backends.spark.chain_slicing import (END_MEASURE, START_MEASURE, chain_blocker,
                                                 chain_rows)
from cepsql.backends.spark.columns import column, shuffle_partitions
from cepsql.backends.spark.execute import RELEVANCE_CONF, run_plan
from cepsql.backends.spark.gap_scan import POSITION_COLUMN
from cepsql.backends.spark.ordered_scan import ordered_scan
from cepsql.backends.spark.slice_columns import COPY_COLUMN, SLICE_COLUMN

__all__ = [
    "BOUNDS_CONF",
    "CHAIN_ROWS_CONF",
    "FIRST_MEASURE",
    "GRID_WINDOWS_CONF",
    "chain_sliced_spec",
    "COPY_COLUMN",
    "SLICE_COLUMN",
    "SlicedClause",
    "slice_labels",
    "slice_plan",
    "slicing_blocker",
    "spark_hash_long",
    "bounds_settings",
    "sliced_inputs",
    "sliced_spec",
    "time_cut",
    "time_key",
    "unsliced_spec",
    "HIDDEN",
    "RESERVED",
]

FIRST_MEASURE = "__cep_slice_first"  # hidden measure: COPY_COLUMN of the match's first row
TIME_COLUMN = "__cep_slice_t"        # the ORDER BY key in microseconds, computed once
HOME_COLUMN = "__cep_slice_home"     # (while cutting) the slice whose core holds the row
MARK_COLUMNS = ("__cep_slice_before", "__cep_slice_after", "__cep_slice_pos")  # (window path)
HIDDEN = (SLICE_COLUMN, COPY_COLUMN, FIRST_MEASURE, POSITION_COLUMN, BREAK_COLUMN,
          START_MEASURE, END_MEASURE)
RESERVED = HIDDEN + (TIME_COLUMN, HOME_COLUMN) + MARK_COLUMNS
MIN_SLICE_WINDOWS = 4
GRID_WINDOWS = 16
BOUNDS_CONF = "cepsql.slicing.bounds"            # "auto" (default) | "grid" | "span" | "scan"
BOUNDS = ("grid", "span", "scan", "auto")
# "true": a scan without gap pushdown profiles its partitions to prune columns (off by
# default: at 5M rows the profile job cost more than the smaller transfer saved, 3.91 s
# vs 3.59 s, bench_unpartitioned.py)
PRUNE_CONF = "cepsql.slicing.scanPrune"
GRID_WINDOWS_CONF = "cepsql.slicing.gridWindows"
# SQL:2016 chain slicing: rows read before each slice's first row for the speculative
# chains (default chain_slicing.chain_rows'; tiny values make tests widen)
CHAIN_ROWS_CONF = "cepsql.slicing.chainRows"


@dataclass
class SlicedClause:
    """The clause rewritten for slicing: plan ``spec`` over ``frame`` (with
    ``planning_inputs``), run it, then pass the result through ``finish``."""
    frame: DataFrame
    spec: MatchRecognizeSpec
    slices: int  # 0: a time grid, as many slices as the data cover
    planning_inputs: dict = field(default_factory=dict)
    scan: object = None  # ordered_scan.OrderedScan: input partitions as slices, no shuffle

    def run(self, frame: DataFrame, plan) -> DataFrame:
        """The worker output of ``plan`` (planned from ``spec``) over ``frame``."""
        if self.scan is not None:
            return self.scan.run(frame, plan)
        return run_plan(frame, plan, partitions=self.slices or None)  # a task per slice

    def finish(self, out: DataFrame) -> DataFrame:
        """Matches of the slice holding their first row, in the clause's own layout."""
        kept = out.where(~column(FIRST_MEASURE))
        return kept.select(*[column(c) for c in out.columns if c not in HIDDEN])


def slice_plan(spark: SparkSession, df: DataFrame, plan, *, options=None,
               statistics: Callable | None = None, max_slices: int | None = None,
               min_slice_windows: float = MIN_SLICE_WINDOWS, bounds: str | None = None,
               grid_windows: float | None = None) -> SlicedClause | None:
    """The sliced form of a planned clause over ``df``, or None (run ``plan`` as it is).

    plan: the clause's QueryPlan; only a plan without partition columns is sliced (an
    inferred PARTITION BY already spreads the work). options: PlannerOptions (``slicing``
    off -> None). statistics: the caller's statistics callable; it is handed the clause
    without the slicing additions. bounds: "grid" (no job), "span" (a min/max job),
    "scan" (input partitions as slices, two small jobs) or "auto" (scan with gap pushdown
    for a contiguity clause over a file source, else grid), default from
    ``cepsql.slicing.bounds`` or "auto"; max_slices (default
    spark.sql.shuffle.partitions) and min_slice_windows apply to "span", grid_windows
    (default ``cepsql.slicing.gridWindows`` or 16) to "grid"."""
    spec = getattr(plan, "spec", None)
    if plan.partition_columns or not isinstance(spec, MatchRecognizeSpec):
        return None
    if (options is not None and not options.slicing) or slicing_blocker(spec) is not None:
        return None
    taken = {c.lower() for c in df.columns} | {m.name.lower() for m in spec.measures}
    if taken & {h.lower() for h in RESERVED}:
        return None
    if spec.strategy is None:
        return _chain_slices(spark, df, plan, spec, options, statistics, bounds)
    key_sql = to_spark_sql(spec.order_by[0].expr)
    try:
        micros = time_key(df, key_sql)
    except Exception:  # noqa: BLE001  (Spark cannot evaluate it: the planner will say why)
        return None
    if micros is None:
        return None
    bounds, grid_windows = bounds_settings(spark, bounds, grid_windows)
    window = float(spec.window.size)
    back = window if contains_negation(spec.pattern) else 0.0
    # a slice reads ``after`` past its core's end and ``before`` ahead of its start (in
    # time); so a row at t is copied to the slices whose cores meet [t - after, t + before]
    after, before = (window, back) if spec.order_by[0].ascending else (back, window)
    if bounds == "scan" or (bounds == "auto" and _gap_sql(df, spec) is not None
                            and _reads_files(df)):
        scanned = _scan_slices(df, plan, spec, after, before, options, statistics)
        if scanned is not None:
            return scanned
    found = time_cut(df, micros, key_sql, after, before, grid_windows * window,
                     bounds == "span", max_slices, min_slice_windows)
    if found is None:
        return None
    cut, count, how = found
    _explain(plan, f"{how} of the ORDER BY time", after, before)
    return SlicedClause(cut, sliced_spec(spec), count, sliced_inputs(options, statistics))


def time_cut(df: DataFrame, micros: tuple, key_sql: str, after: float, before: float,
             grid_width: float, span: bool = False, max_slices: int | None = None,
             min_slice_windows: float = MIN_SLICE_WINDOWS) -> tuple | None:
    """(df's rows cut into overlapping time slices: SLICE_COLUMN and COPY_COLUMN added,
    the slice count (0: a grid, as many as the data cover), how, in words) or None
    (span: fewer than two slices fit). micros: ``time_key(df, key_sql)``; a slice also
    reads ``after`` micros past its core and ``before`` ahead of it; grid_width: a grid
    slice's width in micros, span: equal slices of the data's span instead (a job)."""
    width = max(grid_width, 1.0)
    cut = None
    if not span and micros[2]:
        cut = _window_cut(df, key_sql, width, after, before)
    if cut is not None:
        count, how = 0, f"a grid of slices {width / 1e6:g} s wide (as many as the data cover)"
    else:
        # the time once per row (a TIMESTAMP_NTZ's micros cost ~0.5 us in Spark; the cut
        # reads it up to five times); rows without a finite time fit no window: a NULL
        # one gives no slice (explode of a NULL sequence), NaN and infinities are dropped
        timed = df.select("*", micros[0].alias(TIME_COLUMN))
        time = column(TIME_COLUMN)
        if micros[1]:
            timed = timed.where(~F.isnan(time) & (F.abs(time) != F.lit(math.inf)))
        if not span:
            cut = _grid_cut(timed, time, width, after, before)
            count, how = 0, f"a grid of slices {width / 1e6:g} s wide (as many as the data cover)"
        else:
            found = _span_cut(timed, time, max_slices, min_slice_windows, after, before)
            if found is None:
                return None
            cut, count, width = found
            how = f"{count} slices of {width / 1e6:g} s"
        cut = _with_copy_flag(cut.drop(TIME_COLUMN))
    return cut, count, how


def _explain(plan, how: str, after: float, before: float) -> None:
    plan.explain_notes.append(
        f"Time slicing: {how}, each also reading {after / 1e6:g} s "
        f"after and {before / 1e6:g} s before itself; a match is output by the slice "
        "holding its first row")


def sliced_inputs(options, statistics) -> dict:
    """The planning inputs of a sliced clause: statistics of the clause as written."""
    inputs: dict = {} if options is None else {"options": options}
    if getattr(statistics, "in_worker", False):  # tasks estimate from their own rows
        inputs["statistics"] = statistics
    elif statistics is not None:
        inputs["statistics"] = lambda s: statistics(unsliced_spec(s))
    return inputs


def _chain_slices(spark: SparkSession, df: DataFrame, plan, spec: MatchRecognizeSpec,
                  options, statistics, bounds: str | None) -> SlicedClause | None:
    """A SQL:2016 SKIP PAST LAST ROW clause over input partitions as slices, each
    searched from where the chain of matches enters it (chain_slicing.py), or None: the
    ordered scan's preconditions fail (a grid cannot count rows), bounds ``grid`` or
    ``span``, or (``auto``) the source is not read from files."""
    bounds, _ = bounds_settings(spark, bounds, None)
    if bounds not in ("scan", "auto") or (bounds == "auto" and not _reads_files(df)):
        return None
    wanted = (spark.conf.get(CHAIN_ROWS_CONF, "") or "").strip()
    chain = chain_rows(spec, int(wanted) if wanted else None)
    scan = ordered_scan(df, plan, 0.0, 0.0, gaps=_gap_sql(df, spec), chain=chain)
    if scan is None:
        return None
    plan.explain_notes.append(
        f"Time slicing: {scan.describe()}; a match is output by the slice holding its "
        "first row")
    extra = [F.lit(0).cast("long").alias(SLICE_COLUMN), F.lit(False).alias(COPY_COLUMN)]
    if scan.gaps is None:  # (with gap pushdown the scan numbers the rows itself)
        extra.append(F.lit(0).cast("long").alias(POSITION_COLUMN))
    frame = scan.frame(df, extra)
    return SlicedClause(frame, chain_sliced_spec(spec), len(scan.layout),
                        sliced_inputs(options, statistics), scan)


def chain_sliced_spec(spec: MatchRecognizeSpec) -> MatchRecognizeSpec:
    """(SQL:2016 chain slicing) The clause partitioned by slice, with the hidden
    measures: whether the first row is a copy, and the first and last rows' positions
    (the driver numbers the rows around a border in POSITION_COLUMN)."""
    sliced = sliced_spec(spec)
    position = ColumnRef(None, POSITION_COLUMN)
    return replace(sliced, measures=sliced.measures + (
        Measure(START_MEASURE, Navigation("FIRST", position, 0)),
        Measure(END_MEASURE, Navigation("LAST", position, 0))))


def _scan_slices(df: DataFrame, plan, spec: MatchRecognizeSpec, after: float, before: float,
                 options, statistics) -> SlicedClause | None:
    """Input partitions as slices (ordered_scan.py), or None: its preconditions fail."""
    prune = (df.sparkSession.conf.get(PRUNE_CONF, "false") or "").strip().lower() == "true"
    scan = ordered_scan(df, plan, after, before, gaps=_gap_sql(df, spec), prune=prune)
    if scan is None:
        return None
    _explain(plan, scan.describe(), after, before)
    frame = scan.frame(df, [F.lit(0).cast("long").alias(SLICE_COLUMN),
                            F.lit(False).alias(COPY_COLUMN)])
    return SlicedClause(frame, sliced_spec(spec, strict=scan.gaps is not None),
                        len(scan.layout), sliced_inputs(options, statistics), scan)


def _gap_sql(df: DataFrame, spec: MatchRecognizeSpec) -> str | None:
    """The clause's gap filter (analyze/relevance.py gap_filter; chain_gap_filter in
    SQL:2016 mode) as Spark SQL, or None: not a contiguity clause (nor a SQL:2016 one
    without PARTITION BY), every row may matter, relevance pushdown switched off."""
    if (df.sparkSession.conf.get(RELEVANCE_CONF, "true") or "").strip().lower() == "false":
        return None
    condition = gap_filter(spec) if spec.strategy is not None else chain_gap_filter(spec)
    if condition is None:
        return None
    try:
        return to_spark_sql(condition)
    except CepError:  # a function Spark SQL text cannot express: keep every row
        return None


def _reads_files(df: DataFrame) -> bool:
    """Whether df's plan scans files (``auto`` bounds try an ordered scan on those only:
    elsewhere the range job would compute the source once more)."""
    try:
        return "FileScan" in df._jdf.queryExecution().executedPlan().toString()
    except Exception:  # noqa: BLE001  (Spark Connect: no JVM plan to look at)
        return False


def bounds_settings(spark: SparkSession, bounds: str | None,
                    grid_windows: float | None) -> tuple[str, float]:
    """(cepsql.slicing.bounds, cepsql.slicing.gridWindows), checked (given ones kept)."""
    if bounds is None:
        bounds = (spark.conf.get(BOUNDS_CONF, "auto") or "auto").strip().lower()
    if bounds not in BOUNDS:
        raise ValueError(f"{BOUNDS_CONF} must be one of {', '.join(BOUNDS)}, not {bounds!r}")
    if grid_windows is None:
        grid_windows = float(spark.conf.get(GRID_WINDOWS_CONF, str(GRID_WINDOWS))
                             or GRID_WINDOWS)
    if not grid_windows > 0:
        raise ValueError(f"{GRID_WINDOWS_CONF} must be positive, not {grid_windows!r}")
    return bounds, grid_windows


def _grid_cut(rows: DataFrame, time: Column, width: float, after: float,
              before: float) -> DataFrame:
    """Rows tagged with their grid slice ``floor(t / width)`` (HOME_COLUMN) and copied
    into every grid slice whose core meets [t - after, t + before] (SLICE_COLUMN).
    Copying one slice too many is harmless (that slice's core does not hold the
    match's first row), so a relative slack absorbs the rounding of the division."""
    slack = F.lit(1.0) + F.abs(time) * F.lit(1e-12)

    def slice_at(t: Column) -> Column:
        return F.floor(t / F.lit(width)).cast("long")

    home, first, last = (slice_at(time), slice_at(time - F.lit(after) - slack),
                         slice_at(time + F.lit(before) + slack))
    # most rows stay in their own slice: a one-element array is cheaper than sequence()
    # (Spark's Generate costs ~0.8 us a row here); a NULL time gives no row
    slices = F.when(first == last, F.array(home)).otherwise(F.sequence(first, last))
    return rows.select("*", home.alias(HOME_COLUMN), F.explode(slices).alias(SLICE_COLUMN))


def _window_cut(df: DataFrame, key_sql: str, width: float, after: float,
                before: float) -> DataFrame | None:
    """The grid cut of a TIMESTAMP_NTZ key without its micros: Spark's tumbling
    ``window()`` works on the raw wall-clock micros (no zone, ~free), so the slice label
    is the window start itself, and two more windows, shifted by ``after`` and by
    ``width - before``, tell whether the row lies within ``after`` of its slice's start
    (then it is copied into the previous slice) or within ``before`` of its end (the
    next slice). Only those copies compute a neighbour's label. None when a slice is
    not wider than after and before (thin grids: _grid_cut)."""
    w, a, b = (int(math.ceil(v)) for v in (width, after, before))
    if not (0 <= a < w and 0 <= b < w):
        return None
    key = F.expr(key_sql)

    def start(offset: int) -> Column:
        return F.window(key, f"{w} microseconds", startTime=f"{offset} microseconds").start

    # one window() per projection (Spark rejects two in one); NULL times are filtered out
    rows = df.select("*", start(0).alias(HOME_COLUMN))
    home = column(HOME_COLUMN)
    step = F.expr(f"INTERVAL '{w}' MICROSECOND")  # NTZ arithmetic is in UTC: exact
    neighbours = []
    if a:  # shifted by a: the start is before home exactly when t - home < a
        rows = rows.select("*", start(a).alias(MARK_COLUMNS[1]))
        neighbours.append((column(MARK_COLUMNS[1]) < home, home - step))
    if b:  # shifted by w - b: the start is after home exactly when t - home >= w - b
        rows = rows.select("*", start(w - b).alias(MARK_COLUMNS[0]))
        neighbours.append((column(MARK_COLUMNS[0]) > home, home + step))
    slices = F.array(home)
    if len(neighbours) == 2:
        (p, pl), (n, nl) = neighbours
        slices = (F.when(p & n, F.array(home, pl, nl)).when(p, F.array(home, pl))
                  .when(n, F.array(home, nl)).otherwise(slices))
    elif neighbours:
        (p, pl), = neighbours
        slices = F.when(p, F.array(home, pl)).otherwise(slices)
    keep = [column(c) for c in df.columns]
    cut = rows.select(*keep, F.posexplode(slices).alias(MARK_COLUMNS[2], SLICE_COLUMN))
    return cut.select(*keep, column(SLICE_COLUMN),
                      (column(MARK_COLUMNS[2]) != F.lit(0)).alias(COPY_COLUMN))


def _with_copy_flag(cut: DataFrame) -> DataFrame:
    """HOME_COLUMN (the row's own slice) replaced by COPY_COLUMN: a boolean is all the
    match's first row must tell (one byte a row instead of eight through the shuffle)."""
    return cut.select(*[column(c) for c in cut.columns if c != HOME_COLUMN],
                      (column(SLICE_COLUMN) != column(HOME_COLUMN)).alias(COPY_COLUMN))


def _span_cut(df: DataFrame, time: Column, max_slices: int | None,
              min_slice_windows: float, after: float, before: float):
    """(rows tagged and copied, slice count, width) for equal slices of the data's time
    span (one min/max job), or None when fewer than two slices fit."""
    bounds = df.agg(F.min(time).alias("lo"), F.max(time).alias("hi")).first()
    if bounds is None or bounds["lo"] is None:
        return None
    lo, hi = float(bounds["lo"]), float(bounds["hi"])
    partitions = shuffle_partitions(df)  # the default bound on the slice count
    count = _slice_count(hi - lo, max(after, before),
                         partitions if max_slices is None else max_slices, min_slice_windows)
    if count < 2:
        return None
    width = (hi - lo) / count
    labels = slice_labels(count, count)  # run_plan shuffles into ``count`` partitions
    label_of = F.array(*[F.lit(v).cast("long") for v in labels])
    slack = 1.0 + 1e-12 * (abs(lo) + abs(hi))  # rounding of the micros arithmetic

    def slice_at(t: Column) -> Column:
        j = F.floor((t - F.lit(lo)) / F.lit(width)).cast("int")
        return F.least(F.greatest(j, F.lit(0)), F.lit(count - 1))

    index = "__cep_slice_index"
    frame = (df
             .select("*", F.element_at(label_of, slice_at(time) + 1).alias(HOME_COLUMN),
                     F.explode(F.sequence(slice_at(time - F.lit(after + slack)),
                                          slice_at(time + F.lit(before + slack)))).alias(index))
             .withColumn(SLICE_COLUMN, F.element_at(label_of, column(index) + 1))
             .drop(index))
    return frame, count, width


def sliced_spec(spec: MatchRecognizeSpec, strict: bool = False) -> MatchRecognizeSpec:
    """The clause partitioned by slice, with the hidden first-row home measure. strict
    (the ordered scan's gap pushdown): STRICT_CONTIGUITY, whose break column the scan's
    tasks fill in from the rows' global positions."""
    # without PARTITION BY strict contiguity is partition contiguity (R5), and a slice is
    # a contiguous range of the input (STRICT_CONTIGUITY with the slice key would compare
    # with the global order, where every row has copies in other slices)
    strategy = "PARTITION_CONTIGUITY" if spec.strategy == "STRICT_CONTIGUITY" else spec.strategy
    if strict:
        strategy = "STRICT_CONTIGUITY"
    return replace(
        spec, strategy=strategy,
        partition_by=(PartitionKey(ColumnRef(None, SLICE_COLUMN), SLICE_COLUMN),),
        measures=spec.measures + (Measure(FIRST_MEASURE,
                                          Navigation("FIRST", ColumnRef(None, COPY_COLUMN), 0)),))


def slicing_blocker(spec: MatchRecognizeSpec) -> str | None:
    """Why the clause cannot be sliced exactly (None: it can)."""
    if spec.strategy is None:  # input partitions as slices, entered where the chain does
        return chain_blocker(spec)
    if spec.window is None or spec.window.kind != "time":
        return "no WITHIN INTERVAL bounds a match in time"
    if spec.partition_by:
        return "PARTITION BY is written: partitions already run in parallel"
    if not spec.order_by:
        return "no ORDER BY"
    reason = whole_input_output(spec)
    if reason:
        return reason
    for expr in list(spec.defines.values()) + [m.expr for m in spec.measures]:
        for e in walk(expr):
            if isinstance(e, Navigation) and e.kind in ("PREV", "NEXT"):
                return f"{e.kind} counts rows, not time"
    return None


def _slice_count(span: float, window: float, max_slices: int, min_slice_windows: float) -> int:
    if span <= 0 or max_slices < 2:
        return 1
    if window > 0 and min_slice_windows > 0:
        return max(1, min(max_slices, int(span // (min_slice_windows * window))))
    return max_slices


def time_key(df: DataFrame, key_sql: str) -> tuple[Column, bool, bool] | None:
    """The ORDER BY key as the evaluator's window time (cep_worker window_micros):
    timestamps in microseconds, dates as whole days, numbers as seconds; as a double,
    whether it may be NaN or infinite (floating keys) and whether it is a
    TIMESTAMP_NTZ (whose micros Spark computes slowly: grids cut it with window())."""
    key = F.expr(key_sql)
    dtype = df.select(key.alias("t")).schema["t"].dataType
    if isinstance(dtype, T.TimestampType):
        return F.unix_micros(key).cast("double"), False, False
    if isinstance(dtype, T.TimestampNTZType):
        # the wall-clock micros, as the evaluator reads them from Arrow; no time zone
        # (timestampdiff and a cast to TIMESTAMP go through the session zone, whose DST
        # changes would move rows an hour apart), and the cheapest exact form measured
        return F.expr(f"CAST(CAST(({key_sql}) - TIMESTAMP_NTZ'1970-01-01 00:00:00' "
                      "AS INTERVAL SECOND) AS DECIMAL(38, 6))").cast("double") * \
            F.lit(1_000_000.0), False, True
    if isinstance(dtype, T.DateType):
        return F.unix_date(key).cast("double") * F.lit(86_400_000_000.0), False, False
    if isinstance(dtype, T.NumericType):
        floating = isinstance(dtype, (T.FloatType, T.DoubleType))
        return key.cast("double") * F.lit(1_000_000.0), floating, False
    return None


def unsliced_spec(spec: MatchRecognizeSpec) -> MatchRecognizeSpec:
    """The clause as written (for statistics): slicing's key and measure removed."""
    return replace(spec,
                   partition_by=tuple(k for k in spec.partition_by if k.name != SLICE_COLUMN),
                   measures=tuple(m for m in spec.measures
                                  if m.name not in (FIRST_MEASURE, START_MEASURE, END_MEASURE)))


# --- slice labels: one task per slice under Spark's hash partitioning --------------------

def slice_labels(count: int, partitions: int) -> list[int]:
    """``count`` bigint labels whose Spark hash partitions (pmod(hash(label), partitions))
    differ while count <= partitions, so repartition(partitions, label) gives each slice a
    task of its own. Pure arithmetic (Spark's Murmur3, seed 42): no job."""
    labels: list[int] = []
    used: set[int] = set()
    candidate = 0
    limit = 64 * partitions + 1024
    while len(labels) < count and candidate < limit:
        p = spark_hash_long(candidate) % partitions
        if p not in used or len(used) >= partitions:
            used.add(p)
            labels.append(candidate)
        candidate += 1
    while len(labels) < count:  # not reached in practice; any label is still correct
        labels.append(candidate)
        candidate += 1
    return labels


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def _mix_k1(k1: int) -> int:
    k1 = (k1 * 0xCC9E2D51) & 0xFFFFFFFF
    return (_rotl(k1, 15) * 0x1B873593) & 0xFFFFFFFF


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF


def spark_hash_long(value: int, seed: int = 42) -> int:
    """Spark's ``hash(bigint)`` (Murmur3_x86_32.hashLong), a signed 32-bit int."""
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(_mix_h1(seed, _mix_k1(value & 0xFFFFFFFF)), _mix_k1(value >> 32))
    h1 ^= 8
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1
