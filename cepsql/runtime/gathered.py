"""Aggregates computed over the rows the matcher lists per output row.

The matcher's running accumulators cover count/sum/avg/min/max. Everything else that
MEASURES may aggregate (DISTINCT, the stddev/variance family, max_by/min_by, listagg,
count_if, bool_and/bool_or, collect_set, arguments reading CLASSIFIER() or
MATCH_NUMBER()) is folded here, in the worker, over the values of the listed rows in
match order, following Spark's definitions (result types, NULL handling, the one-pass
variance update, ties). The worker runs in both backends, so Spark and the in-process
path give the same values.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext

import numpy as np
import pyarrow as pa

from ..algebra.expressions import AggregateValue, ColumnRef, Expr, GatheredAggregate
from ..errors import CepAnalysisError, CepRuntimeError
from .aggregates import MATCH_NUMBER_COLUMN

_NUMERIC = ("sum", "avg", "stddev_samp", "stddev_pop", "var_samp", "var_pop")
_BOOLEAN = ("count_if", "bool_and", "bool_or")


@dataclass
class GatherSpec:
    """What the worker needs for one gathered aggregate (picklable)."""
    func: str
    distinct: bool
    parts: list[tuple[int, tuple[Expr, ...]]]  # (index of the ROWS aggregate, arguments)
    arg_types: list[pa.DataType]
    result: pa.DataType


def bind_gathered(agg: GatheredAggregate, rows_index: list[int],
                  schema: pa.Schema) -> GatherSpec:
    """Check the arguments' types against ``schema`` (the prepared input) and fix the
    result type by Spark's rules."""
    from ..exprs.arrow_eval import evaluate_arrow
    fields = list(schema) + [pa.field(MATCH_NUMBER_COLUMN, pa.int64())]
    empty = pa.schema(fields).empty_table()
    types = [evaluate_arrow(a, empty).type for a in agg.parts[0][1]]
    return GatherSpec(agg.func, agg.distinct, [(q, args) for q, (_, args) in
                                               zip(rows_index, agg.parts)],
                      types, result_type(agg.func, types, agg.pos))


def bind_gathered_all(leaves, schema: pa.Schema) -> tuple[list[GatherSpec], list[pa.Field]]:
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


def result_type(func: str, types: list[pa.DataType], pos: int | None = None) -> pa.DataType:
    """Spark's result type of ``func`` over arguments of ``types``."""
    t = types[0]
    if func in ("count", "count_if"):
        if func == "count_if" and not pa.types.is_boolean(t):
            raise CepAnalysisError(f"count_if() needs a BOOLEAN argument, not {t}", pos=pos)
        return pa.int64()
    if func in ("bool_and", "bool_or"):
        if not pa.types.is_boolean(t):
            raise CepAnalysisError(f"{func}() needs a BOOLEAN argument, not {t}", pos=pos)
        return pa.bool_()
    if func in _NUMERIC and not (pa.types.is_integer(t) or pa.types.is_floating(t)
                                 or pa.types.is_decimal(t) or pa.types.is_null(t)):
        raise CepAnalysisError(f"{func}() needs a numeric argument, not {t}", pos=pos)
    if func == "sum":
        if pa.types.is_decimal(t):
            return pa.decimal128(min(38, t.precision + 10), t.scale)
        return pa.int64() if pa.types.is_integer(t) else pa.float64()
    if func == "avg":
        if pa.types.is_decimal(t):
            return pa.decimal128(min(38, t.precision + 4), min(38, t.scale + 4))
        return pa.float64()
    if func in _NUMERIC:
        return pa.float64()
    if func in ("array_agg", "collect_set"):
        return pa.list_(t)
    if func == "listagg":
        return pa.string()
    return t  # min, max, max_by, min_by: the (first) argument's type


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
    values = [pa.concat_arrays(c).to_pylist() for c in columns]
    if len(spec.parts) > 1:  # per-label lists back into match order
        order = np.lexsort((rows, group))
        group = group[order]
        values = [[v[i] for i in order] for v in values]
    bounds = np.searchsorted(group, np.arange(n_out + 1))
    out = []
    for g in range(n_out):
        lo, hi = bounds[g], bounds[g + 1]
        out.append(fold(spec.func, spec.distinct, [v[lo:hi] for v in values], spec.result))
    return pa.array(out, spec.result)


def _argument(arg: Expr, table: pa.Table, rows: np.ndarray, numbers: np.ndarray) -> pa.Array:
    if isinstance(arg, ColumnRef) and arg.column != MATCH_NUMBER_COLUMN:
        col = table.column(arg.column).take(pa.array(rows, pa.int64()))
        return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    from ..exprs.arrow_eval import evaluate_arrow
    names = {n.column for n in _column_refs(arg)} - {MATCH_NUMBER_COLUMN}
    take = pa.array(rows, pa.int64())
    flat = pa.table({**{name: table.column(name).take(take) for name in sorted(names)},
                     MATCH_NUMBER_COLUMN: pa.array(numbers, pa.int64())})
    value = evaluate_arrow(arg, flat)
    return value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value


def _column_refs(expr: Expr):
    from ..algebra.expressions import walk
    return [n for n in walk(expr) if isinstance(n, ColumnRef)]


# --- Spark's aggregate definitions over one group's values (Python values) --------------

def fold(func: str, distinct: bool, args: list[list], result: pa.DataType) -> object:
    """``func`` over one group; ``args[k]`` = the k-th argument's values in match order."""
    if func in ("max_by", "min_by"):
        return _extreme_by(args[0], args[1], func == "max_by")
    values = [v for v in args[0] if v is not None]
    if distinct or func == "collect_set":
        values = distinct_values(values)
    if func == "count":
        return len(values)
    if func == "count_if":
        return sum(1 for v in values if v)
    if func == "array_agg" or func == "collect_set":
        return values or None
    if not values:
        return None
    if func == "bool_and":
        return all(values)
    if func == "bool_or":
        return any(values)
    if func == "listagg":
        delimiter = next((d for d in args[1] if d is not None), "") if len(args) > 1 else ""
        return delimiter.join(values)
    if func == "sum":
        return _sum(values, result)
    if func == "avg":
        return _avg(values, result)
    if func in ("min", "max"):
        best = values[0]
        for v in values[1:]:
            c = spark_compare(v, best)
            if (c < 0) if func == "min" else (c > 0):
                best = v
        return best
    return _moment(func, values)


def distinct_values(values: list) -> list:
    """First occurrences, equal as Spark groups them (NaN = NaN, -0.0 = 0.0)."""
    seen, out = set(), []
    for v in values:
        key = _group_key(v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def _group_key(v: object) -> object:
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else v + 0.0
    if isinstance(v, list):
        return tuple(_group_key(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _group_key(x)) for k, x in v.items()))
    return v


def spark_compare(a: object, b: object) -> int:
    """Spark's ordering of two non-null values of one type (NaN above every double)."""
    if isinstance(a, float) or isinstance(b, float):
        an, bn = isinstance(a, float) and math.isnan(a), isinstance(b, float) and math.isnan(b)
        if an or bn:
            return (an > bn) - (an < bn)
    if isinstance(a, str) and isinstance(b, str):
        a, b = a.encode(), b.encode()
    return (a > b) - (a < b)


def _extreme_by(values: list, keys: list, largest: bool) -> object:
    """max_by/min_by: the value at the extreme key; rows with a NULL key are skipped and a
    later row with an equal key wins (Spark's update keeps replacing on ties)."""
    best, best_key = None, None
    for v, k in zip(values, keys):
        if k is None:
            continue
        if best_key is None or (spark_compare(k, best_key) >= 0 if largest
                                else spark_compare(k, best_key) <= 0):
            best, best_key = v, k
    return best


def _sum(values: list, result: pa.DataType) -> object:
    if pa.types.is_decimal(result):
        total = sum(values, Decimal(0))
        if abs(total) >= Decimal(10) ** (result.precision - result.scale):
            raise CepRuntimeError(f"sum overflows {result} (Spark's ANSI mode)")
        return total
    if pa.types.is_integer(result):
        total = sum(values)
        if not -(1 << 63) <= total < (1 << 63):
            raise CepRuntimeError("integer overflow in sum (Spark's ANSI mode)")
        return total
    total = 0.0
    for v in values:
        total += float(v)
    return total


def _avg(values: list, result: pa.DataType) -> object:
    if pa.types.is_decimal(result):
        with localcontext() as ctx:
            ctx.prec = 80
            mean = sum(values, Decimal(0)) / Decimal(len(values))
            return mean.quantize(Decimal(1).scaleb(-result.scale), rounding=ROUND_HALF_UP)
    total = 0.0
    for v in values:
        total += float(v)
    return total / len(values)


def _moment(func: str, values: list) -> float | None:
    """Spark's one-pass central moment update (CentralMomentAgg), in row order."""
    n = avg = m2 = 0.0
    for v in values:
        x = float(v)
        n += 1.0
        delta = x - avg
        delta_n = delta / n
        avg += delta_n
        m2 += delta * (delta - delta_n)
    if func in ("stddev_samp", "var_samp"):
        if n == 1.0:
            return None
        var = m2 / (n - 1.0)
    else:
        var = m2 / n
    return math.sqrt(var) if func.startswith("stddev") else var
