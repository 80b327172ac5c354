"""The aggregate functions the evaluators compute: their codes, lanes and result types.

One home for what analysis (an aggregate's result type, which functions CEP mode
rejects) and the condition compiler (its bytecode, the evaluator's state per lane)
both need to know. FUNC_CODES and cython_ext/aggregate_ops.pxi's A_* codes are one list.
"""
from __future__ import annotations

import pyarrow as pa

from cepsql.algebra import types as T
from cepsql.algebra.types import VmType

__all__ = ["FUNC_CODES", "MOMENT_FUNCS", "aggregate_lane", "result_type"]

FUNC_CODES = {"COUNT_STAR": 0, "COUNT": 1, "SUM": 2, "AVG": 3, "MIN": 4, "MAX": 5, "LIST": 6,
              "ROWS": 6,  # ROWS: a LIST that feeds a gathered aggregate (no output column)
              # DEFINE only (SQL:2016 matcher): Spark's one-pass variance update
              "VAR_SAMP": 7, "VAR_POP": 8, "STDDEV_SAMP": 9, "STDDEV_POP": 10,
              # DEFINE only: the value at the last row holding the extreme ordering
              "MAX_BY": 11, "MIN_BY": 12,
              # DEFINE only: element_at(array_agg(x), i), read from the listed rows
              "ELEMENT": 13}

# Spark's variance family: a double update (CentralMomentAgg) in the aggregate state
MOMENT_FUNCS = ("VAR_SAMP", "VAR_POP", "STDDEV_SAMP", "STDDEV_POP")


def aggregate_lane(func: str, arg: VmType | None) -> tuple[list[int], VmType]:
    """How an evaluator computes an aggregate over a column of type arg, and its result
    type: [exact (0 double lane, 1 exact lane), argument scale, result scale, result
    precision (0: BIGINT / integral, wrapped or checked at 64 bits)]."""
    if func in ("COUNT_STAR", "COUNT"):
        return [1, 0, 0, 0], T.BIGINT
    if func in ("LIST", "ROWS"):
        return [0, 0, 0, 0], arg
    exact = arg is not None and arg.exact
    if func in MOMENT_FUNCS:  # a double update over the column's value (either lane)
        return [int(exact), arg.scale if exact else 0, 0, 0], T.DOUBLE
    if func in ("MIN", "MAX"):
        return [int(exact), arg.scale if exact else 0, 0, 0], arg
    if not exact:
        return [0, 0, 0, 0], T.DOUBLE
    if func == "SUM":
        out = T.sum_type(arg)
    elif arg.name == "decimal" or arg.name == "interval":
        out = T.avg_type(arg)
    else:
        return [1, 0, 0, -1], T.DOUBLE  # avg of integers: a double sum (Spark's order)
    return [1, arg.scale, out.scale, out.precision], out


def result_type(func: str, arg_type: pa.DataType | None) -> pa.DataType:
    """Arrow type of an aggregate's result (Spark's rules: sum of integers BIGINT, of
    DECIMAL(p, s) DECIMAL(p + 10, s), avg of DECIMAL(p, s) DECIMAL(p + 4, s + 4), both
    bounded to 38 digits; avg of anything else DOUBLE)."""
    if func in ("COUNT_STAR", "COUNT"):
        return pa.int64()
    if func in ("SUM", "AVG"):
        arg = T.of_arrow(arg_type)
        return T.to_arrow(aggregate_lane(func, arg)[1])
    if func == "LIST":
        return pa.list_(arg_type)
    return arg_type  # MIN / MAX gather the row holding the extreme value
