"""Aggregates computed over the rows the matcher lists per output row.

The matcher's running accumulators cover count/sum/avg/min/max. Everything else that
MEASURES may aggregate (DISTINCT, the stddev/variance family, max_by/min_by, listagg,
count_if, bool_and/bool_or, collect_set, arguments reading CLASSIFIER() or
MATCH_NUMBER()) is folded here, in the worker, over the values of the listed rows in
match order, following Spark's definitions (``spark_folds``). The worker runs in both
backends, so Spark and the in-process path give the same values.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cepsql.algebra.expressions import AggregateValue, ColumnRef, Expr, GatheredAggregate, walk
from cepsql.errors import CepUnsupportedError
from cepsql.analyze.aggregates import MATCH_NUMBER_COLUMN, result_type
from cepsql.analyze.measures import Leaves
from cepsql.runtime.spark_folds import fold_groups


@dataclass
class GatherSpec:
    """What the worker needs for one gathered aggregate (picklable)."""
    func: str
    distinct: bool
    parts: list[tuple[int, tuple[Expr, ...]]]  # (index of the ROWS aggregate, arguments)
    arg_types: list[pa.DataType]
    result: pa.DataType
    delimiter: str | None = None  # listagg's constant delimiter


def bind_gathered(agg: GatheredAggregate, rows_index: list[int],
                  schema: pa.Schema) -> GatherSpec:
    """Check the arguments' types against ``schema`` (the prepared input) and fix the
    result type by Spark's rules."""
    from cepsql.exprs.arrow_eval import evaluate_arrow
    fields = list(schema) + [pa.field(MATCH_NUMBER_COLUMN, pa.int64())]
    empty = pa.schema(fields).empty_table()
    args = agg.parts[0][1]
    types = [evaluate_arrow(a, empty).type for a in args]
    result = result_type(agg.func, types[0], agg.pos)
    if pa.types.is_duration(types[0]) and agg.func in ("sum", "avg"):  # Spark's type, not our fold's
        raise CepUnsupportedError(f"{agg.func}() over an interval is not supported here "
                                  "(DISTINCT, or an argument the matcher cannot accumulate)",
                                  pos=agg.pos)
    delimiter = None
    if agg.func == "listagg" and len(args) > 1:
        delimiter = args[1].value  # a string constant (or NULL), checked when normalized
    return GatherSpec(agg.func, agg.distinct, [(q, a) for q, (_, a) in
                                               zip(rows_index, agg.parts)],
                      types, result, delimiter)


def bind_gathered_all(leaves: Leaves, schema: pa.Schema) -> tuple[list[GatherSpec], list[pa.Field]]:
    """GatherSpecs and output fields (``__cep_g<i>``) of a clause's gathered aggregates."""
    specs, fields = [], []
    for i, agg in enumerate(leaves.gathered):
        rows_index = [leaves.aggregates.index(AggregateValue("ROWS", var, agg.rows_column,
                                                             agg.final))
                      for var, _ in agg.parts]
        spec = bind_gathered(agg, rows_index, schema)
        specs.append(spec)
        fields.append(pa.field(f"__cep_g{i}", spec.result, nullable=True))
    return specs, fields


def compute(spec: GatherSpec, table: pa.Table, lists: dict[int, tuple[np.ndarray, np.ndarray]],
            list_rows: np.ndarray, match_numbers: np.ndarray) -> pa.Array:
    """The aggregate for every output row; ``lists[q]`` = (starts into list_rows, lengths)
    of ROWS aggregate q per output row."""
    n_out = len(match_numbers)
    groups, order_rows, columns = [], [], [[] for _ in spec.arg_types]
    for q, args in spec.parts:
        starts, lengths = lists[q]
        total = int(lengths.sum())
        group = np.repeat(np.arange(n_out, dtype=np.int64), lengths)
        picks = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths) + \
            np.repeat(starts, lengths)
        rows = list_rows[picks] if total else np.zeros(0, dtype=np.int64)
        groups.append(group)
        order_rows.append(rows)
        for k, (arg, t) in enumerate(zip(args, spec.arg_types)):
            columns[k].append(_argument(arg, table, rows, match_numbers[group]).cast(t))
    group = np.concatenate(groups)
    rows = np.concatenate(order_rows)
    values = [pa.concat_arrays(c) for c in columns]
    if len(spec.parts) > 1:  # per-label lists back into match order
        order = np.lexsort((rows, group))
        group = group[order]
        values = [v.take(pa.array(order)) for v in values]
    bounds = np.searchsorted(group, np.arange(n_out + 1))
    delimiter = None
    if spec.func == "listagg":
        delimiter = spec.delimiter
        values = values[:1]
    return fold_groups(spec.func, spec.distinct, values, bounds, spec.result, delimiter)


def _argument(arg: Expr, table: pa.Table, rows: np.ndarray, numbers: np.ndarray) -> pa.Array:
    if isinstance(arg, ColumnRef) and arg.column != MATCH_NUMBER_COLUMN:
        col = table.column(arg.column).take(pa.array(rows, pa.int64()))
        return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    from cepsql.exprs.arrow_eval import evaluate_arrow
    names = {n.column for n in _column_refs(arg)} - {MATCH_NUMBER_COLUMN}
    take = pa.array(rows, pa.int64())
    flat = pa.table({**{name: table.column(name).take(take) for name in sorted(names)},
                     MATCH_NUMBER_COLUMN: pa.array(numbers, pa.int64())})
    value = evaluate_arrow(arg, flat)
    return value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value


def _column_refs(expr: Expr) -> list[ColumnRef]:
    return [n for n in walk(expr) if isinstance(n, ColumnRef)]
