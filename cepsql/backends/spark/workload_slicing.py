"""Time slicing of a workload's shared pass: its unpartitioned, time-windowed CEP views on
many tasks.

A view without PARTITION BY queried alone is cut into overlapping time slices
(slicing.py); in a shared pass the same views would run as one ordered stream in one task.
When every clause of a pass can be sliced (CEP mode, WITHIN INTERVAL, no PARTITION BY,
slicing.slicing_blocker) over one ORDER BY key, the source is cut once for all of them
(slicing.time_cut): each slice reads the largest window after its core (and before it,
when some pattern has NOT), which holds every clause's matches since each window is at
most that. Every clause is planned again as slicing plans it alone
(slicing.sliced_spec: PARTITION BY the slice, the hidden measure telling whether the
match's first row is a copy), so the pass groups them by the slice as by any PARTITION
BY and the sharing planner still shares their sub-patterns.

Off unless ``cepsql.workload.timeSlicing=true``: measured in one process on 2 cores
(bench_workload_spark.py --kind stock, 30 sparse views, 200k rows, load 5, the sliced
and unsliced pass alternated), the sliced pass with every frame took 5.8 s and 5.5 s of
CPU against 4.6 s and 4.5 s: where the pass's evaluation is small the cut, the copies,
four tasks each setting up every pattern and the match numbers' extra stage cost more
than the second core gives. It pays where one task's evaluation dominates (dense
matches, long windows, many cores).

Reading a sliced clause's rows (``SlicedRows``): the matches whose first row is a copy
are dropped (their slice's core does not hold them) and the hidden columns (the slice,
the flag) left out. MATCH_NUMBER numbers the matches of the whole stream by their first
row first (docs/cep_mode.md R7): the slices' cores are consecutive time ranges and the
kept matches of a slice are a contiguous run of its own numbers, so the whole stream's
number is the dense rank of (slice in time order, number within the slice).
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from cepsql.algebra.expressions import ColumnRef, Expr
from cepsql.algebra.pattern import contains_negation
from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.analyze.measures import MATCH_NUMBER_COLUMN
from cepsql.compile.query_plan import QueryPlan
from cepsql.errors import CepAnalysisError
from cepsql.exprs.spark_conf import conf_value
from cepsql.exprs.spark_arrow import arrow_schema
from cepsql.exprs.spark_sql import to_spark_sql
from cepsql.runtime.error_position import plan_site, sited_plan
from cepsql.backends.spark.slicing import (FIRST_MEASURE, HIDDEN, RESERVED, SLICE_COLUMN,
                                           bounds_settings, sliced_inputs, sliced_spec,
                                           slicing_blocker, time_cut, time_key)

__all__ = ["PassSlicing", "SlicedRows", "TIME_SLICING_CONF", "slice_pass", "sliced_rows"]

#: "true": a pass of unpartitioned, time-windowed CEP clauses is time-sliced (default off)
TIME_SLICING_CONF = "cepsql.workload.timeSlicing"


@dataclass
class PassSlicing:
    """A pass's source cut into time slices (``frame``), for the EXPLAIN text ``how``."""
    frame: DataFrame
    how: str
    descending: bool  # the ORDER BY runs backwards in time: later slices come first


@dataclass
class SlicedRows:
    """How a sliced clause's worker rows read as the clause's own: ``projection`` without
    the hidden columns, the worker column of the copy flag (drop the rows where it is
    TRUE), of the slice and of the match number (the whole stream's is their dense
    rank)."""
    projection: list[tuple[str, Expr]]
    first: str
    slice: str
    number: str
    descending: bool


def slice_pass(spark: SparkSession, source: DataFrame, clauses: list, planner
               ) -> tuple[PassSlicing, list[QueryPlan]] | None:
    """The source cut into slices for every clause and each clause's sliced plan (sited
    as its own plan), or None: some clause cannot be sliced, the clauses order by
    different keys, slicing is off, or the key is no time. clauses: (plan, (spec, sql,
    planning inputs) the planner was given, or None). planner: the clauses' planner."""
    wanted = (conf_value(spark, TIME_SLICING_CONF, "false") or "").strip().lower()
    if wanted not in ("true", "false"):
        raise CepAnalysisError(f"{TIME_SLICING_CONF} must be true or false, not {wanted!r}")
    if wanted != "true" or source.isStreaming or not clauses:
        return None
    keys = set()
    for plan, asked in clauses:
        spec = getattr(plan, "spec", None)
        if (asked is None or plan.partition_columns or plan.break_column is not None
                or not isinstance(spec, MatchRecognizeSpec) or spec.strategy is None
                or slicing_blocker(spec) is not None):
            return None
        options = asked[2].get("options")
        if options is not None and not options.slicing:
            return None
        keys.add((to_spark_sql(spec.order_by[0].expr), spec.order_by[0].ascending))
        taken = {c.lower() for c in source.columns} | {m.name.lower() for m in spec.measures}
        if taken & {h.lower() for h in RESERVED}:
            return None
    if len(keys) != 1:
        return None
    (key_sql, ascending), = keys
    try:
        micros = time_key(source, key_sql)
    except Exception:  # noqa: BLE001  (Spark cannot evaluate it: as slice_plan)
        return None
    if micros is None:
        return None
    specs = [plan.spec for plan, _ in clauses]
    window = max(float(s.window.size) for s in specs)
    back = max([float(s.window.size) for s in specs if contains_negation(s.pattern)],
               default=0.0)
    after, before = (window, back) if ascending else (back, window)
    bounds, grid_windows = bounds_settings(spark, None, None)
    found = time_cut(source, micros, key_sql, after, before, grid_windows * window,
                     span=bounds == "span")
    if found is None:
        return None
    frame, _, how = found
    schema = arrow_schema(frame)
    plans = []
    for plan, (spec, sql, planning) in clauses:
        sliced = planner(sliced_spec(spec), schema, sql,
                         **sliced_inputs(planning.get("options"), planning.get("statistics")))
        site = plan_site(plan)
        plans.append(sited_plan(sliced, site) if site is not None else sliced)
    how = (f"{how} of the ORDER BY time, each also reading {after / 1e6:g} s after and "
           f"{before / 1e6:g} s before itself (the largest window); a match is output by "
           "the slice holding its first row")
    return PassSlicing(frame, how, not ascending), plans


def sliced_rows(final_projection: list[tuple[str, Expr]], descending: bool) -> SlicedRows:
    """A sliced clause's bound final projection read as the clause's own (SlicedRows)."""
    worker = {name: expr.column for name, expr in final_projection
              if isinstance(expr, ColumnRef)}
    return SlicedRows([(n, e) for n, e in final_projection if n not in HIDDEN],
                      worker[FIRST_MEASURE], worker[SLICE_COLUMN], MATCH_NUMBER_COLUMN,
                      descending)

