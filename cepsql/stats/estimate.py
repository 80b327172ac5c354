"""Estimate arrival rates and predicate selectivities of a pattern from its input.

Entry points: ``estimate_from_table`` (an Arrow table, sampled locally) and
``estimate_from_spark`` (a DataFrame, sampled by Spark under a time budget). Both build
the same prepared sample (see ``prepare``) and hand it to ``estimate_prepared``.

Definitions (what the planner's JQPG reduction needs, VLDB 2018 section 3):
- a variable's *rate* is how many rows per time unit satisfy its single-row DEFINE
  conjuncts, within one PARTITION BY group (pooled over groups, see
  ``sampling.rows_per_second``); the time unit is the second of the first ORDER BY key,
  or one row when there is no usable ORDER BY key;
- a pair's *selectivity* is the fraction of row pairs (first row satisfying the first
  variable's single-row part, second the second's, same partition, within the window
  when there is one, in either time order) that satisfy every conjunct reading exactly
  those two variables. Time order is deliberately not imposed: the reduction models
  SEQ as a separate timestamp predicate, so the data predicate's selectivity must not
  already contain it.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.algebra.spec import MatchRecognizeSpec
from cepsql.errors import CepRuntimeError, CepUnsupportedError
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.analyze.conjuncts import COLUMN_PREFIX, LEFT_PREFIX, RIGHT_PREFIX, ConditionSplit, analyze_defines
from cepsql.stats.model import Pair, PatternStatistics
from cepsql.stats.prepare import (ORDER_COLUMN, partition_column, prepare_table, sample_table,
                                  unary_column, unary_flags)
from cepsql.stats.sample_memo import SampleMemo
from cepsql.stats.sampling import group_ids, positions, rows_per_second, sample_pairs, seconds_axis
from cepsql.stats.spark_sample import collect_sample

DEFAULT_SAMPLE_ROWS = 50_000
DEFAULT_MAX_PAIRS = 50_000


def estimate_from_table(spec: MatchRecognizeSpec, table: pa.Table, *,
                        max_rows: int = DEFAULT_SAMPLE_ROWS,
                        max_pairs: int = DEFAULT_MAX_PAIRS, seed: int = 0,
                        memo: SampleMemo | None = None) -> PatternStatistics:
    """Statistics of spec over an Arrow table, from a uniform sample of max_rows rows.
    ``memo`` (one per table, shared by the clauses estimated over it; only when the
    whole table is the sample) computes what two clauses have in common once; each pair
    is then drawn with its own generator (seed), whatever clause asks first."""
    started = time.monotonic()
    rng = np.random.default_rng(seed)
    split = analyze_defines(spec)
    notes = list(split.ignored)
    sample, fraction = sample_table(table, max_rows, rng)
    if fraction < 1.0:
        memo = None  # a sample of its own per call: nothing in common to keep
    prepared = prepare_table(spec, split, sample, notes, memo)
    return estimate_prepared(spec, split, prepared, fraction=fraction, rng=rng,
                             max_pairs=max_pairs, started=started, notes=notes,
                             input_rows=table.num_rows, memo=memo, seed=seed)


def unary_fractions(split: ConditionSplit, table: pa.Table) -> dict[str, float]:
    """Fraction of table's rows satisfying each variable's single-row conditions -- the
    ``unary_selectivity`` of ``estimate_from_table`` without the pairs, window and time
    axis, a few times cheaper: what adaptive re-planning checks first on each chunk."""
    n = table.num_rows
    if n == 0:
        return {v: 1.0 for v in split.variables}
    notes: list[str] = []
    return {v: pc.sum(pc.cast(unary_flags(split, v, table, notes), pa.int64())).as_py() / n
            for v in split.variables}


def estimate_from_spark(spec: MatchRecognizeSpec, df: Any, *,
                        sample_rows: int = DEFAULT_SAMPLE_ROWS, time_budget_s: float = 5.0,
                        max_pairs: int = DEFAULT_MAX_PAIRS, seed: int = 0) -> PatternStatistics:
    """Statistics of spec over a Spark DataFrame from a bounded sample of about
    sample_rows rows, collected within time_budget_s (``truncated`` says if it was not)."""
    started = time.monotonic()
    split = analyze_defines(spec)
    notes = list(split.ignored)
    got = collect_sample(spec, split, df, sample_rows=sample_rows,
                         time_budget_s=time_budget_s, seed=seed)
    notes += got.notes
    prepared = got.table if got.table is not None else _empty_prepared(spec, split)
    return estimate_prepared(spec, split, prepared, fraction=got.fraction,
                             rng=np.random.default_rng(seed), max_pairs=max_pairs,
                             started=started, notes=notes, input_rows=got.input_rows,
                             truncated=got.truncated)


def estimate_prepared(spec: MatchRecognizeSpec, split: ConditionSplit, prepared: pa.Table, *,
                      fraction: float, rng: np.random.Generator, max_pairs: int,
                      started: float, notes: list[str], input_rows: int | None = None,
                      truncated: bool = False, memo: SampleMemo | None = None,
                      seed: int = 0) -> PatternStatistics:
    """Rates and selectivities from a prepared sample drawn with the given fraction
    (``memo``: see estimate_from_table; pairs then use their own generators of seed)."""
    n = prepared.num_rows
    variables = split.variables
    if n == 0:
        notes.append("no input rows sampled: every rate and selectivity defaults to 1")
        return PatternStatistics(
            rates={v: 1.0 for v in variables},
            selectivities={p: 1.0 for p in split.pairs},
            unary_selectivity={v: 1.0 for v in variables}, sample_rows=0,
            seconds=time.monotonic() - started, truncated=truncated,
            window_units=None if spec.window is None else float(spec.window.size),
            rate_unit="row", input_rows=input_rows, pairs_evaluated={p: 0 for p in split.pairs},
            notes=tuple(notes))
    layout = (tuple(k.expr for k in spec.partition_by),
              spec.order_by[0].expr if spec.order_by else None)

    def axes():
        ids = group_ids([prepared.column(partition_column(i))
                         for i in range(len(spec.partition_by))], n)
        return ids, seconds_axis(prepared.column(ORDER_COLUMN)) if spec.order_by else None
    groups, seconds = axes() if memo is None else memo.get(("axes", layout), axes)
    if spec.order_by and seconds is None:
        notes.append("the first ORDER BY key is neither a time nor a number: rates are per row")
    row_rate = None if seconds is None else rows_per_second(groups, seconds, fraction)
    if seconds is not None and row_rate is None:
        notes.append("no partition of the sample spans any time: rates are per row")
    rate_unit = _order_unit(spec, prepared.column(ORDER_COLUMN)) if row_rate is not None else "row"
    flags = {v: np.asarray(prepared.column(unary_column(i)).to_numpy(zero_copy_only=False),
                           dtype=bool) for i, v in enumerate(variables)}
    unary = {v: float(flags[v].mean()) for v in variables}
    rates = {v: unary[v] * (row_rate if row_rate is not None else 1.0) for v in variables}
    axis, window, window_units = _window_axis(spec, groups, seconds, row_rate, fraction, notes)
    selectivities: dict[Pair, float] = {}
    evaluated: dict[Pair, int] = {}

    def measured(pair, conjuncts, rng):
        """(selectivity, pairs evaluated, notes) of one pair."""
        said: list[str] = []
        left, right = (np.flatnonzero(flags[v]) for v in pair)
        i, j, _ = sample_pairs(left, right, groups, axis, window, max_pairs, rng)
        if len(i) == 0 and window is not None:
            said.append(f"{pair[0]}-{pair[1]}: no candidate pairs within the window; "
                        "selectivity measured over whole partitions")
            i, j, _ = sample_pairs(left, right, groups, None, None, max_pairs, rng)
        if len(i) == 0:
            said.append(f"{pair[0]}-{pair[1]}: no candidate pairs; selectivity set to 1")
            return 1.0, 0, said
        return _pair_selectivity(pair, conjuncts, prepared, split, i, j, said), len(i), said

    for pair, conjuncts in split.pairs.items():
        if memo is None:
            selectivity, count, said = measured(pair, conjuncts, rng)
        else:  # the same conditions over the same rows, whatever the variables' names
            key = ("pair", layout, spec.window and spec.window.kind, window, max_pairs, seed,
                   tuple(split.columns), tuple(conjuncts),
                   *(tuple(split.unary[v]) for v in pair))
            selectivity, count, said = memo.get(key, lambda: measured(
                pair, conjuncts, np.random.default_rng(seed)))
            said = [f"{pair[0]}-{pair[1]}:" + note.split(":", 1)[1] for note in said]
        selectivities[pair], evaluated[pair] = selectivity, count
        notes += said
    return PatternStatistics(
        rates=rates, selectivities=selectivities, unary_selectivity=unary, sample_rows=n,
        seconds=time.monotonic() - started, truncated=truncated, window_units=window_units,
        rate_unit=rate_unit, input_rows=input_rows, pairs_evaluated=evaluated,
        notes=tuple(notes))


def _window_axis(spec: MatchRecognizeSpec, groups: np.ndarray, seconds: np.ndarray | None,
                 row_rate: float | None, fraction: float, notes: list[str]
                 ) -> tuple[np.ndarray | None, float | None, float | None]:
    """(axis the window is measured on, window half-width on it, window in rate units)."""
    w = spec.window
    if w is None:
        return None, None, None
    if w.kind == "time":
        if seconds is None:
            notes.append("WITHIN INTERVAL without a time/number ORDER BY key: window ignored")
            return None, None, None
        size = w.size / 1e6  # microseconds -> seconds
        units = size if row_rate is not None else None
        if units is None:
            notes.append("time window cannot be expressed in per-row rates")
        return seconds, size, units
    # WITHIN n ROWS: last position - first position < n
    axis = positions(groups, seconds, fraction)
    units = w.size / row_rate if row_rate is not None else float(w.size)
    return axis, max(w.size - 1, 0), units


def _pair_selectivity(pair: Pair, conjuncts: list, prepared: pa.Table, split: ConditionSplit,
                      i: np.ndarray, j: np.ndarray, notes: list[str]) -> float:
    """Fraction of the sampled pairs (i, j) satisfying all of the pair's conjuncts."""
    li, rj = pa.array(i), pa.array(j)
    cols: dict[str, pa.Array | pa.ChunkedArray] = {}
    for k in range(len(split.columns)):
        source = prepared.column(f"{COLUMN_PREFIX}{k}")
        cols[f"{LEFT_PREFIX}{k}"] = source.take(li)
        cols[f"{RIGHT_PREFIX}{k}"] = source.take(rj)
    pairs = pa.table(cols) if cols else pa.table({"__cep_n": pa.nulls(len(i))})
    ok: pa.Array | pa.ChunkedArray = pa.repeat(pa.scalar(True), len(i))
    for conjunct in conjuncts:
        try:
            value = evaluate_arrow(conjunct, pairs)
        except (CepUnsupportedError, CepRuntimeError) as exc:
            # e.g. overflow on row pairs that could never meet in a match: not the
            # query's error, just no estimate for this conjunct
            notes.append(f"{pair[0]}-{pair[1]}: condition left out ({exc})")
            continue
        ok = pc.and_kleene(ok, value)
    hits = pc.sum(pc.cast(pc.fill_null(ok, False), pa.int64())).as_py() or 0
    return hits / len(i)


def _empty_prepared(spec: MatchRecognizeSpec, split: ConditionSplit) -> pa.Table:
    """A zero-row prepared sample (nothing arrived from Spark)."""
    return pa.table({unary_column(i): pa.array([], pa.bool_())
                     for i in range(len(split.variables))})


def _order_unit(spec, column) -> str:
    """'second' for time ORDER BY keys; for a plain number (a sequence number, a
    counter) the unit is one step of that column, named after it."""
    t = column.type
    if pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_date(t):
        return "second"
    expr = spec.order_by[0].expr
    name = getattr(expr, "column", None)
    return f"unit of {name}" if isinstance(name, str) else "unit of the ORDER BY key"
