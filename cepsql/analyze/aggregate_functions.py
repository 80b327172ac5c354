"""The aggregate functions the evaluators compute: their lanes and result types.

One home for what analysis (an aggregate's result type, which functions CEP mode
rejects) and the condition compiler (the evaluator's state per lane) both need to know;
the evaluators' function codes are compile.opcodes.FUNC_CODES.
"""
from __future__ import annotations

import pyarrow as pa

from cepsql.algebra import types as T
from cepsql.algebra.types import VmType
from cepsql.errors import CepAnalysisError

__all__ = ["MOMENT_FUNCS", "aggregate_lane", "result_type"]

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


# the matcher's function codes under the canonical names of GATHERED
_CANONICAL = {"COUNT_STAR": "count", "LIST": "array_agg", "ROWS": "array_agg"}
_NUMERIC = ("sum", "avg", "stddev_samp", "stddev_pop", "var_samp", "var_pop")


def result_type(func: str, arg_type: pa.DataType | None, pos: int | None = None) -> pa.DataType:
    """Arrow type of an aggregate's result, by Spark's rules (algebra.types: sum of
    integers BIGINT, of DECIMAL(p, s) DECIMAL(p + 10, s), avg of DECIMAL(p, s) DECIMAL(p + 4,
    s + 4), both bounded to 38 digits, of an interval an interval; avg and the moments of
    anything else DOUBLE). func: a matcher function name (compile.opcodes.FUNC_CODES keys) or a GATHERED name; arg_type:
    the (first) argument's type, None for COUNT_STAR. Raises CepAnalysisError for an
    argument Spark rejects."""
    name = _CANONICAL.get(func, func.lower())
    if name in ("count", "count_if"):
        if name == "count_if" and not pa.types.is_boolean(arg_type):
            raise CepAnalysisError(f"count_if() needs a BOOLEAN argument, not {arg_type}", pos=pos)
        return pa.int64()
    if name in ("bool_and", "bool_or"):
        if not pa.types.is_boolean(arg_type):
            raise CepAnalysisError(f"{name}() needs a BOOLEAN argument, not {arg_type}", pos=pos)
        return pa.bool_()
    if name in _NUMERIC:
        interval = name in ("sum", "avg") and pa.types.is_duration(arg_type)
        if not (pa.types.is_integer(arg_type) or pa.types.is_floating(arg_type) or interval
                or pa.types.is_decimal(arg_type) or pa.types.is_null(arg_type)):
            raise CepAnalysisError(f"{name}() needs a numeric argument, not {arg_type}", pos=pos)
        if pa.types.is_null(arg_type) or name not in ("sum", "avg"):
            return pa.float64()
        arg = T.of_arrow(arg_type)
        return T.to_arrow(T.sum_type(arg) if name == "sum" else T.avg_type(arg))
    if name in ("array_agg", "collect_set"):
        return pa.list_(arg_type)
    if name == "listagg":
        return pa.string()
    return arg_type  # min, max, max_by, min_by: the (first) argument's type