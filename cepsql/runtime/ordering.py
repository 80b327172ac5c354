"""Spark's row order on Arrow tables: stable multi-key sort with per-key NULL placement
and NaN above every number. Run-time work (streaming engines, table functions, the local
backend sort their rows with it); imports neither sqlglot nor pyspark, so a Python worker
pays only for pyarrow."""
from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from cepsql.compile.query_plan import SortColumn
from cepsql.exprs.arrow_eval import is_nested_type

__all__ = ["sort_table", "sort_indices", "comparable"]


def sort_table(table: pa.Table, keys: list[SortColumn]) -> pa.Table:
    """Stable multi-key sort with per-key NULL placement; NaN sorts above every number
    (Spark's order)."""
    if not keys or table.num_rows == 0:
        return table
    return table.take(sort_indices(table, keys))


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _string_ranks(col) -> pa.Array:
    """Strings replaced by their rank among the distinct values: the same order, but
    sorting int32 codes is several times faster than comparing strings."""
    encoded = pc.dictionary_encode(col)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.unify_dictionaries().combine_chunks()
    dictionary = encoded.dictionary
    rank_of_code = pc.rank(dictionary, sort_keys="ascending", tiebreaker="dense")
    return rank_of_code.take(encoded.indices)


def _spark_key(value: object) -> tuple:
    """A Python sort key giving Spark's order of one array or struct value: element by
    element (a shorter array first when it is a prefix), NULL below any value, NaN above
    every number and -0.0 equal to 0.0 (Arrow cannot sort nested types)."""
    if value is None:
        return (0,)
    if isinstance(value, float):
        return (1, math.isnan(value), 0.0 if math.isnan(value) else value + 0.0)
    if isinstance(value, (list, tuple)):
        return (1, tuple(_spark_key(v) for v in value))
    if isinstance(value, dict):
        return (1, tuple(_spark_key(v) for v in value.values()))
    return (1, value)


def comparable(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """col as values Arrow's kernels sort and compare in Spark's order: arrays and
    structs replaced by their dense rank (NULL stays NULL), other columns unchanged.
    Ordering by a nested column is rare, so its ranks are computed on Python values."""
    if not is_nested_type(col.type):
        return col
    keys = [None if v is None else _spark_key(v) for v in col.to_pylist()]
    rank = {k: i for i, k in enumerate(sorted({k for k in keys if k is not None}))}
    return pa.array([None if k is None else rank[k] for k in keys], pa.int64())


def sort_indices(table: pa.Table, keys: list[SortColumn]) -> pa.Array:
    """The row order sort_table uses: per key a null-placement flag, a NaN flag for
    floating-point columns, then the values (Arrow's sort_indices is stable)."""
    arrays, sort_keys = [], []
    for key in keys:
        col = table.column(key.column)
        order = "ascending" if key.ascending else "descending"
        if col.null_count:  # flags cost a sort key each: only where they matter
            arrays.append(pc.is_valid(col) if key.nulls_first else pc.is_null(col))
            sort_keys.append((f"k{len(arrays) - 1}", "ascending"))
        if pa.types.is_floating(col.type) and pc.any(pc.is_nan(col)).as_py():
            arrays.append(pc.fill_null(pc.is_nan(col), False))
            sort_keys.append((f"k{len(arrays) - 1}", order))
        arrays.append(_string_ranks(col) if _is_string(col.type) else
                      comparable(col))
        sort_keys.append((f"k{len(arrays) - 1}", order))
    key_table = pa.Table.from_arrays(arrays, names=[f"k{i}" for i in range(len(arrays))])
    return pc.sort_indices(key_table, sort_keys=sort_keys)
