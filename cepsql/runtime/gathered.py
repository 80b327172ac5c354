"""Gathered aggregates in the worker: MEASURES aggregates the matcher's accumulators
do not cover (compile.gathered.GatherSpec), folded over the rows the matcher lists per
output row, in match order, by Spark's definitions (``spark_folds``). Runs in tasks, in
both backends, so Spark and the in-process path give the same values."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from cepsql.algebra.expressions import ColumnRef, Expr, walk
from cepsql.analyze.aggregates import MATCH_NUMBER_COLUMN
from cepsql.compile.gathered import GatherSpec
from cepsql.exprs.arrow_eval import evaluate_arrow
from cepsql.runtime.spark_folds import fold_groups


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
    names = {n.column for n in _column_refs(arg)} - {MATCH_NUMBER_COLUMN}
    take = pa.array(rows, pa.int64())
    flat = pa.table({**{name: table.column(name).take(take) for name in sorted(names)},
                     MATCH_NUMBER_COLUMN: pa.array(numbers, pa.int64())})
    value = evaluate_arrow(arg, flat)
    return value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value


def _column_refs(expr: Expr) -> list[ColumnRef]:
    return [n for n in walk(expr) if isinstance(n, ColumnRef)]
