"""Spark's row order on Arrow tables: stable multi-key sort with per-key NULL placement
and NaN above every number. Run-time work (streaming engines, table functions, the local
backend sort their rows with it); imports neither sqlglot nor pyspark, so a Python worker
pays only for pyarrow."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from cepsql.compile.query_plan import SortColumn

__all__ = ["sort_table", "sort_indices"]


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
        arrays.append(_string_ranks(col) if _is_string(col.type) else col)
        sort_keys.append((f"k{len(arrays) - 1}", order))
    key_table = pa.Table.from_arrays(arrays, names=[f"k{i}" for i in range(len(arrays))])
    return pc.sort_indices(key_table, sort_keys=sort_keys)
