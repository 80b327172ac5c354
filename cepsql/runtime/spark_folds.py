"""Spark's aggregate definitions over groups of values, vectorised (runs in tasks: the
workers fold gathered MEASURES aggregates with it, runtime/gathered.py).

``fold_groups`` computes one aggregate for every group of a flat Arrow array whose
groups are contiguous (``bounds[g]:bounds[g+1]``, values in match order), with numpy and
Arrow compute only: the per-row work never goes through Python objects. Sequential
definitions (Spark's one-pass variance update, a floating sum in row order) run one
position of every group per step, so each group sees exactly the operations Spark's
update applies row by row. ``fold_one`` is the same definitions written per group over
Python values; it serves the cases the vector path does not cover (exact decimals,
nested values) and, in the tests, as the cross-check of the vector path.
"""
from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal, localcontext

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cepsql.errors import CepRuntimeError

MOMENTS = ("stddev_samp", "stddev_pop", "var_samp", "var_pop")


def fold_groups(func: str, distinct: bool, args: list[pa.Array], bounds: np.ndarray,
                result: pa.DataType, delimiter: str | None = None) -> pa.Array:
    """``func`` over each group of ``args`` (the aggregate's argument columns)."""
    try:
        return _vector(func, distinct, args, bounds, result, delimiter)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, _NoVectorPath):
        values = [a.to_pylist() for a in args]
        out = [fold_one(func, distinct, [v[lo:hi] for v in values], result, delimiter)
               for lo, hi in zip(bounds[:-1], bounds[1:])]
        return pa.array(out, result)


class _NoVectorPath(Exception):
    pass


# A sequential fold costs one numpy step per position of the longest group; when a few
# long groups hold most values, the per-group loop over Python floats (the same
# operations, so the same bits) is the cheaper way.
_STEP_COST = 40  # one numpy step ~ this many Python-level value updates


def _vector(func, distinct, args, bounds, result, delimiter) -> pa.Array:
    n_groups = len(bounds) - 1
    group = np.repeat(np.arange(n_groups, dtype=np.int64), np.diff(bounds))
    if func in ("max_by", "min_by"):
        return _extreme_by(args[0], args[1], group, n_groups, func == "max_by", result)
    values = args[0]
    keep = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    values, group = values.filter(pa.array(keep)), group[keep]
    if distinct or func == "collect_set":
        first = _first_occurrences(values, group)
        values, group = values.take(pa.array(first)), group[first]
    counts = np.bincount(group, minlength=n_groups)
    if func == "count":
        return pa.array(counts, pa.int64())
    if func == "count_if":
        truth = np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool)
        return pa.array(np.bincount(group, weights=truth, minlength=n_groups).astype(np.int64))
    empty = counts == 0
    if func in ("bool_and", "bool_or"):
        truth = np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool)
        trues = np.bincount(group, weights=truth, minlength=n_groups)
        out = trues == counts if func == "bool_and" else trues > 0
        return pa.array(out, pa.bool_(), mask=empty)
    if func in ("array_agg", "collect_set", "listagg"):
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        lists = pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(empty))
        if func != "listagg":
            return lists.cast(result)
        return pc.binary_join(lists, delimiter or "").cast(result)
    if func in ("min", "max"):
        return _extreme(values, group, n_groups, func == "max", result)
    if pa.types.is_decimal(values.type) and func in ("sum", "avg"):
        raise _NoVectorPath()  # exact decimal arithmetic
    if func in MOMENTS + ("sum", "avg") and len(counts) and \
            int(counts.max()) * _STEP_COST > len(values):
        raise _NoVectorPath()  # few long groups
    if func in MOMENTS:
        return _moments(func, _floats(values), group, n_groups)
    if func == "avg":
        total = _sequential_sum(_floats(values), group, n_groups)
        with np.errstate(invalid="ignore", divide="ignore"):
            return pa.array(total / counts, pa.float64(), mask=empty)
    if func == "sum":
        if pa.types.is_integer(result):
            ints = np.asarray(values.cast(pa.int64()).to_numpy(zero_copy_only=False))
            return pa.array(_sequential_sum(ints, group, n_groups), pa.int64(), mask=empty)
        return pa.array(_sequential_sum(_floats(values), group, n_groups), pa.float64(),
                        mask=empty)
    raise _NoVectorPath()


def _floats(values: pa.Array) -> np.ndarray:
    doubles = values.cast(pa.float64(), safe=False)  # Spark's cast: nearest double
    return np.asarray(doubles.to_numpy(zero_copy_only=False), dtype=np.float64)


def _positions(group: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Each value's position inside its group, and the values ordered by position (a
    stable order, so one step of a sequential fold touches every group at most once)."""
    counts = np.bincount(group, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(len(group)) - starts[group]
    return pos, np.argsort(pos, kind="stable")


def _steps(group: np.ndarray, n_groups: int):
    """Index arrays, one per position: the values that are every group's k-th."""
    pos, order = _positions(group, n_groups)
    if len(order) == 0:
        return
    edges = np.flatnonzero(np.diff(pos[order])) + 1
    yield from np.split(order, edges)


def _sequential_sum(x: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Per-group sums added in row order (Spark's update), int64 overflow checked."""
    total = np.zeros(n_groups, dtype=x.dtype)
    for idx in _steps(group, n_groups):
        g = group[idx]
        before, add = total[g], x[idx]
        with np.errstate(over="ignore"):
            after = before + add
        if x.dtype == np.int64 and np.any(((before ^ after) & (add ^ after)) < 0):
            raise CepRuntimeError("integer overflow in sum (Spark's ANSI mode)")
        total[g] = after
    return total


def _moments(func: str, x: np.ndarray, group: np.ndarray, n_groups: int) -> pa.Array:
    """Spark's CentralMomentAgg update, one row of every group per step."""
    n = np.zeros(n_groups)
    avg = np.zeros(n_groups)
    m2 = np.zeros(n_groups)
    for idx in _steps(group, n_groups):
        g = group[idx]
        with np.errstate(over="ignore", invalid="ignore"):  # inf/NaN as in Spark
            _moment_step(x[idx], g, n, avg, m2)
    sample = func in ("stddev_samp", "var_samp")
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        var = m2 / (n - 1.0) if sample else m2 / n
    out = np.sqrt(var) if func.startswith("stddev") else var
    return pa.array(out, pa.float64(), mask=(n == 0) | ((n == 1) & sample))


def _moment_step(x: np.ndarray, g: np.ndarray, n: np.ndarray, avg: np.ndarray,
                 m2: np.ndarray) -> None:
    new_n = n[g] + 1.0
    delta = x - avg[g]
    delta_n = delta / new_n
    avg[g] = avg[g] + delta_n
    m2[g] = m2[g] + delta * (delta - delta_n)
    n[g] = new_n


def _ranks(values: pa.Array) -> np.ndarray:
    """Dense ranks in Spark's order (NaN above every number, -0.0 = 0.0, bytes for
    strings); raises ArrowNotImplementedError for types Arrow cannot sort."""
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(pc.rank(values, sort_keys="ascending", tiebreaker="dense")
                      .to_numpy(zero_copy_only=False), dtype=np.int64)


def _first_occurrences(values: pa.Array, group: np.ndarray) -> np.ndarray:
    """Indexes of each group's first occurrence of every distinct value, in order."""
    ranks = _ranks(values)
    key = group * (int(ranks.max(initial=0)) + 1) + ranks
    _, first = np.unique(key, return_index=True)
    return np.sort(first)


def _extreme(values, group, n_groups, largest, result) -> pa.Array:
    ranks = _ranks(values)
    order = np.lexsort((ranks if largest else -ranks, group))
    return _last_per_group(values, group[order], order, n_groups, result)


def _extreme_by(values, keys, group, n_groups, largest, result) -> pa.Array:
    """max_by/min_by: the value at the extreme key; rows with a NULL key are skipped and
    the later of equal keys wins (Spark keeps replacing on ties)."""
    keep = np.asarray(keys.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    rows = np.flatnonzero(keep)
    ranks = _ranks(keys.filter(pa.array(keep)))
    g = group[rows]
    order = np.lexsort((rows, ranks if largest else -ranks, g))
    return _last_per_group(values, g[order], rows[order], n_groups, result)


def _last_per_group(values, sorted_group, picks, n_groups, result) -> pa.Array:
    """values at the last of each group's sorted picks (NULL for a group without any)."""
    take = np.full(n_groups, -1, dtype=np.int64)
    if len(sorted_group):
        last = np.flatnonzero(np.append(np.diff(sorted_group) != 0, True))
        take[sorted_group[last]] = picks[last]
    out = values.take(pa.array(take, mask=take < 0))
    return out.cast(result) if out.type != result else out


# --- the same definitions per group, over Python values --------------------------------

def fold_one(func: str, distinct: bool, args: list[list], result: pa.DataType,
             delimiter: str | None = None) -> object:
    """``func`` over one group; ``args[k]`` = the k-th argument's values in match order."""
    if func in ("max_by", "min_by"):
        best, best_key = None, None
        for v, k in zip(args[0], args[1]):
            if k is not None and (best_key is None or (
                    _compare(k, best_key) >= 0 if func == "max_by"
                    else _compare(k, best_key) <= 0)):
                best, best_key = v, k
        return best
    values = [v for v in args[0] if v is not None]
    if distinct or func == "collect_set":
        values = _distinct(values)
    if func == "count":
        return len(values)
    if func == "count_if":
        return sum(1 for v in values if v)
    if not values:
        return None
    if func in ("array_agg", "collect_set"):
        return values
    if func == "bool_and":
        return all(values)
    if func == "bool_or":
        return any(values)
    if func == "listagg":
        return (delimiter or "").join(values)
    if func in ("min", "max"):
        best = values[0]
        for v in values[1:]:
            c = _compare(v, best)
            if (c < 0) if func == "min" else (c > 0):
                best = v
        return best
    if func == "sum":
        return _sum(values, result)
    if func == "avg":
        return _avg(values, result)
    return _moment(func, [float(v) for v in values])


def _distinct(values: list) -> list:
    """First occurrences, equal as Spark groups them (NaN = NaN, -0.0 = 0.0)."""
    seen, out = set(), []
    for v in values:
        key = ("nan",) if isinstance(v, float) and math.isnan(v) else \
            (v + 0.0 if isinstance(v, float) else repr(v) if isinstance(v, (list, dict)) else v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def _compare(a: object, b: object) -> int:
    """Spark's ordering of two non-null values of one type (NaN above every double)."""
    if isinstance(a, float) and isinstance(b, float) and (math.isnan(a) or math.isnan(b)):
        return (math.isnan(a) > math.isnan(b)) - (math.isnan(a) < math.isnan(b))
    if isinstance(a, str) and isinstance(b, str):
        a, b = a.encode(), b.encode()
    return (a > b) - (a < b)


def _sum(values: list, result: pa.DataType) -> object:
    if pa.types.is_decimal(result):
        total = sum(values, Decimal(0))
        if abs(total) >= Decimal(10) ** (result.precision - result.scale):
            raise CepRuntimeError(f"sum overflows {result} (Spark's ANSI mode)")
        return total
    if pa.types.is_integer(result):
        total = 0
        for v in values:
            total += v
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


def _moment(func: str, xs: list[float]) -> float | None:
    n = avg = m2 = 0.0
    for x in xs:
        n += 1.0
        delta = x - avg
        delta_n = delta / n
        avg += delta_n
        m2 += delta * (delta - delta_n)
    sample = func in ("stddev_samp", "var_samp")
    if sample and n == 1.0:
        return None
    var = m2 / (n - 1.0) if sample else m2 / n
    return math.sqrt(var) if func.startswith("stddev") else var
